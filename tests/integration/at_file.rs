//! `@file` arguments that hold images, side by side with pi 1.6.0: the
//! image goes to an image-capable model as an image block (converted and
//! fitted as `read` does, the notes where pi puts them), and a model
//! without image input gets pi's placeholder while the session keeps the
//! image.

use serde_json::{json, Value};

use crate::common::*;

/// A `w`×`h` PNG of noise (so that a re-encoding clearly prefers JPEG,
/// whichever encoder makes it).
fn png(w: u32, h: u32) -> Vec<u8> {
    let mut seed = 0x2545_f491_u32;
    let img = image::RgbImage::from_fn(w, h, |_, _| {
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let [a, b, c, _] = seed.to_le_bytes();
        image::Rgb([a, b, c])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

/// A 2×2 24-bit BMP.
fn bmp() -> Vec<u8> {
    let img = image::RgbImage::from_pixel(2, 2, image::Rgb([255, 0, 0]));
    let mut out = std::io::Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut out, image::ImageFormat::Bmp)
        .unwrap();
    out.into_inner()
}

/// The files every run gets, in its cwd.
fn write_files(dir: &std::path::Path) {
    std::fs::write(dir.join("red.png"), png(4, 3)).unwrap();
    std::fs::write(dir.join("wide.png"), png(3000, 20)).unwrap();
    std::fs::write(
        dir.join("broken.png"),
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR truncated",
    )
    .unwrap();
    std::fs::write(dir.join("s.bmp"), bmp()).unwrap();
    std::fs::write(dir.join("notes.txt"), "hello\n").unwrap();
}

/// Points the mock's models.json at a model with these input kinds.
fn set_input(agent: &std::path::Path, input: &[&str]) {
    let path = agent.join("models.json");
    let mut v = read_json(&path);
    v["providers"]["mock"]["models"][0]["input"] = json!(input);
    std::fs::write(&path, v.to_string()).unwrap();
}

/// The first request's messages after the system prompt, with the run's
/// cwd written as `CWD` and each image's data reduced to its MIME type
/// unless `keep_data`.
fn sent(log: &std::path::Path, cwd: &std::path::Path, keep_data: bool) -> Value {
    let text = std::fs::read_to_string(log).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let msgs = Value::Array(first["body"]["messages"].as_array().unwrap()[1..].to_vec());
    let cwd = std::fs::canonicalize(cwd).unwrap().display().to_string();
    let mut s = msgs.to_string().replace(&cwd, "CWD");
    if !keep_data {
        let re_start = "\"url\":\"data:";
        while let Some(at) = s.find(re_start) {
            let rest = &s[at + re_start.len()..];
            let semi = rest.find(";base64,").unwrap();
            let end = rest.find('"').unwrap();
            let mime = rest[..semi].to_string();
            s = format!("{}\"mime\":\"{mime}{}", &s[..at], &rest[end..]);
        }
    }
    serde_json::from_str(&s).unwrap()
}

/// The user message the session recorded (images as they were stored).
fn recorded_user(sb: &Sandbox) -> Value {
    let sessions = jsonl(&sb.session(&["ls", "--all", "--format", "jsonl"]));
    let file = sessions[0]["path"].as_str().unwrap().to_string();
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["message"]["role"] == "user")
        .unwrap()["message"]["content"]
        .clone()
}

fn run_both(
    test: &str,
    input: &[&str],
    args: &[&str],
    keep_data: bool,
) -> Option<(Value, Value, Sandbox)> {
    let o = Oracle::find(test)?;
    let pi_sb = Sandbox::new();
    write_files(&pi_sb.cwd());
    let pi_mock = MockLlm::start(&o, pi_sb.root(), &json!([]));
    pi_mock.configure(&pi_sb.agent());
    set_input(&pi_sb.agent(), input);
    let pi = o.pi160(&pi_sb).args(args).output().unwrap();
    assert!(pi.status.success(), "pi: {}", stderr(&pi));

    let sb = Sandbox::new();
    write_files(&sb.cwd());
    let mock = MockLlm::start(&o, sb.root(), &json!([]));
    mock.configure(&sb.agent());
    set_input(&sb.agent(), input);
    let ours = sb.cmd("pi-run").args(args).output().unwrap();
    assert_eq!(ok(&ours).trim(), "ok");
    Some((
        sent(&pi_mock.log, &pi_sb.cwd(), keep_data),
        sent(&mock.log, &sb.cwd(), keep_data),
        sb,
    ))
}

#[test]
fn image_at_file_reaches_an_image_model_as_pi_sends_it() {
    let args = ["-p", "@red.png", "@notes.txt", "describe"];
    let Some((pi, ours, sb)) = run_both(
        "image_at_file_reaches_an_image_model_as_pi_sends_it",
        &["text", "image"],
        &args,
        true,
    ) else {
        return;
    };
    assert_eq!(ours, pi);
    // The image block is there, byte for byte.
    let parts = ours[0]["content"].as_array().unwrap();
    assert_eq!(parts[1]["type"], "image_url");
    let recorded = recorded_user(&sb);
    assert_eq!(recorded[1]["type"], "image");
    assert_eq!(recorded[1]["mimeType"], "image/png");
}

#[test]
fn converted_fitted_and_broken_images_carry_pis_notes() {
    // A BMP converted to PNG (the note inside the tag), a wide PNG fitted to
    // 2000 px (JPEG or PNG, the note after the prompt), a PNG that does not
    // decode (omitted, its note after the prompt). The fitted image's bytes
    // come from another encoder, so images compare by MIME type.
    let args = ["-p", "@s.bmp", "@wide.png", "@broken.png", "describe"];
    let Some((pi, ours, _sb)) = run_both(
        "converted_fitted_and_broken_images_carry_pis_notes",
        &["text", "image"],
        &args,
        false,
    ) else {
        return;
    };
    assert_eq!(ours, pi);
}

#[test]
fn a_model_without_image_input_gets_pis_placeholder() {
    let args = ["-p", "@red.png", "@s.bmp", "describe"];
    let Some((pi, ours, sb)) = run_both(
        "a_model_without_image_input_gets_pis_placeholder",
        &["text"],
        &args,
        true,
    ) else {
        return;
    };
    assert_eq!(ours, pi);
    assert!(ours
        .to_string()
        .contains("(image omitted: model does not support images)"));
    // The session keeps both images: a later image-capable model sees them.
    let recorded = recorded_user(&sb);
    assert_eq!(recorded.as_array().unwrap().len(), 3);
}
