//! `read` on images against the real pi 1.6.0: resizing to 2000×2000, the
//! 4.5 MiB base64 limit, BMP conversion, undecodable images. The images are
//! generated here (deterministic); `tests/oracle/tools/capture-images.sh`
//! runs the same files through pi and records, per case, the text blocks and
//! the returned image's MIME type and dimensions in
//! `tests/fixtures/pi-tools/read-images.json`. The image bytes themselves
//! are not compared (pi's encoders differ from ours). No node needed.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use base64::Engine;
use image::{DynamicImage, ImageFormat, RgbImage};
use pi_lib::format::ContentBlock;
use pi_lib::tools::{builtin, ToolContext};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A smooth colour gradient (compresses well: PNG beats JPEG).
fn gradient(w: u32, h: u32) -> DynamicImage {
    DynamicImage::ImageRgb8(RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(x * 255 / w.max(1)) as u8, (y * 255 / h.max(1)) as u8, 128])
    }))
}

/// Random pixels (incompressible: JPEG beats PNG, PNG is ~3 bytes a pixel).
fn noise(w: u32, h: u32, seed: u64) -> DynamicImage {
    let mut s = seed | 1;
    let mut buf = vec![0u8; (w * h * 3) as usize];
    for b in buf.iter_mut() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        *b = (s >> 24) as u8;
    }
    DynamicImage::ImageRgb8(RgbImage::from_raw(w, h, buf).unwrap())
}

fn encode(img: &DynamicImage, format: ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    match format {
        ImageFormat::Jpeg => {
            let enc = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90);
            img.write_with_encoder(enc).unwrap();
        }
        ImageFormat::Gif => DynamicImage::ImageRgba8(img.to_rgba8())
            .write_to(&mut out, format)
            .unwrap(),
        ImageFormat::Png => {
            let enc = image::codecs::png::PngEncoder::new_with_quality(
                &mut out,
                image::codecs::png::CompressionType::Fast,
                image::codecs::png::FilterType::Adaptive,
            );
            img.write_with_encoder(enc).unwrap();
        }
        _ => img.write_to(&mut out, format).unwrap(),
    }
    out.into_inner()
}

type Gen = fn() -> Vec<u8>;

/// The cases: name, file name, how to make the file's bytes.
fn cases() -> Vec<(&'static str, &'static str, Gen)> {
    vec![
        ("small-png", "small.png", || {
            encode(&gradient(100, 50), ImageFormat::Png)
        }),
        ("large-png", "big.png", || {
            encode(&gradient(3000, 1500), ImageFormat::Png)
        }),
        ("large-jpeg-photo", "big.jpg", || {
            encode(&noise(2200, 1100, 7), ImageFormat::Jpeg)
        }),
        ("large-jpeg-smooth", "smooth.jpg", || {
            encode(&gradient(2400, 1200), ImageFormat::Jpeg)
        }),
        ("tall-fit-sequential", "tall.png", || {
            encode(&gradient(2001, 2086), ImageFormat::Png)
        }),
        ("scale-rounds-half-up", "wide.png", || {
            encode(&gradient(2250, 100), ImageFormat::Png)
        }),
        ("bytes-over-limit", "heavy.png", || {
            encode(&noise(1300, 1300, 3), ImageFormat::Png)
        }),
        ("base64-just-over-limit", "over.png", || {
            encode(&noise(1100, 1100, 5), ImageFormat::Png)
        }),
        ("base64-just-under-limit", "under.png", || {
            encode(&noise(1070, 1070, 9), ImageFormat::Png)
        }),
        ("bmp-small", "small.bmp", || {
            encode(&gradient(40, 30), ImageFormat::Bmp)
        }),
        ("bmp-large", "big.bmp", || {
            encode(&gradient(2600, 1000), ImageFormat::Bmp)
        }),
        ("bmp-undecodable", "broken.bmp", || {
            let mut b = encode(&gradient(40, 30), ImageFormat::Bmp);
            b.truncate(54);
            b
        }),
        ("bmp-like-text", "bm.txt", || b"BMW is a car\n".to_vec()),
        ("gif-large", "big.gif", || {
            encode(&gradient(2500, 400), ImageFormat::Gif)
        }),
        ("webp-small", "small.webp", || {
            encode(&gradient(40, 30), ImageFormat::WebP)
        }),
        ("png-truncated", "cut.png", || {
            encode(&gradient(100, 50), ImageFormat::Png)[..60].to_vec()
        }),
    ]
}

/// What a result looks like without the image bytes.
fn summarise(content: &Value) -> Value {
    let blocks: Vec<Value> = content
        .as_array()
        .unwrap()
        .iter()
        .map(|b| match b["type"].as_str() {
            Some("image") => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(b["data"].as_str().unwrap())
                    .unwrap();
                let img = image::load_from_memory(&bytes).unwrap();
                let format = image::guess_format(&bytes).unwrap();
                json!({
                    "type": "image",
                    "mimeType": b["mimeType"],
                    "format": format.to_mime_type(),
                    "width": img.width(),
                    "height": img.height(),
                })
            }
            _ => b.clone(),
        })
        .collect();
    Value::Array(blocks)
}

/// Runs `read` on the case's file; a description of the difference, if any.
async fn check_case(name: &str, file: &str, cwd: PathBuf, want: &Value) -> Option<String> {
    let tool = builtin("read").unwrap();
    let ctx = ToolContext {
        tool_call_id: String::new(),
        caller: None,
        sandbox: Default::default(),
        host: None,
        env: Vec::new(),
        auto_resize_images: true,
        cwd,
        cancel: CancellationToken::new(),
    };
    let out = tool
        .execute(json!({ "path": file }), ctx, Box::new(|_| {}))
        .await;
    let content = serde_json::to_value(&out.content).unwrap();
    let got = json!({"isError": out.is_error, "content": summarise(&content)});
    // structuredContent repeats the text (and the image) like pi's
    let first_text = match out.content.first() {
        Some(ContentBlock::Text(t)) => t.text.clone(),
        _ => String::new(),
    };
    let structured_ok = match (&out.structured, out.content.get(1)) {
        (Some(s), Some(ContentBlock::Image(img))) => {
            s["type"] == "image"
                && s["note"] == first_text.as_str()
                && s["mimeType"] == img.mime_type.as_str()
                && s["data"] == img.data.as_str()
        }
        (Some(s), None) => s == &Value::String(first_text),
        _ => false,
    };
    (got != *want || !structured_ok).then(|| {
        format!("{name}: ours {got}\n  pi {want}\n  structuredContent ok: {structured_ok}")
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn read_images_match_pi_160() {
    let text =
        std::fs::read_to_string(repo().join("tests/fixtures/pi-tools/read-images.json")).unwrap();
    let expected: Value = serde_json::from_str(&text).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut tasks = Vec::new();
    for (name, file, gen) in cases() {
        let cwd = tmp.path().join(name);
        let want = expected[name].clone();
        tasks.push(tokio::spawn(async move {
            std::fs::create_dir(&cwd).unwrap();
            let bytes = tokio::task::spawn_blocking(gen).await.unwrap();
            std::fs::write(cwd.join(file), &bytes).unwrap();
            check_case(name, file, cwd, &want).await
        }));
    }
    let mut failures = Vec::new();
    for t in tasks {
        if let Some(f) = t.await.unwrap() {
            failures.push(f);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Writes the case files for `capture-images.sh`:
/// `PI_READ_IMAGES_DUMP=dir cargo test --test read_images -- --ignored`.
#[test]
#[ignore]
fn dump_cases_for_capture() {
    let Ok(dir) = std::env::var("PI_READ_IMAGES_DUMP") else {
        return;
    };
    let cases: Vec<Value> = cases()
        .into_iter()
        .map(|(name, file, gen)| {
            let bytes = gen();
            json!({
                "name": name,
                "tool": "read",
                "args": {"path": file},
                "setup": {"files": {file: {"base64": base64::engine::general_purpose::STANDARD.encode(bytes)}}},
            })
        })
        .collect();
    std::fs::write(
        Path::new(&dir).join("cases.json"),
        serde_json::to_string(&json!({ "cases": cases })).unwrap(),
    )
    .unwrap();
}

/// Turns pi's raw results (capture.mjs output for the dumped cases) into the
/// committed fixture: `PI_READ_IMAGES_RAW=raw.json PI_READ_IMAGES_OUT=out.json
/// cargo test --test read_images -- --ignored`.
#[test]
#[ignore]
fn summarise_capture() {
    let (Ok(raw), Ok(out)) = (
        std::env::var("PI_READ_IMAGES_RAW"),
        std::env::var("PI_READ_IMAGES_OUT"),
    ) else {
        return;
    };
    let raw: Value = serde_json::from_str(&std::fs::read_to_string(raw).unwrap()).unwrap();
    let mut summary = serde_json::Map::new();
    for (name, _, _) in cases() {
        let r = &raw[name];
        summary.insert(
            name.to_string(),
            json!({"isError": r["isError"], "content": summarise(&r["content"])}),
        );
    }
    std::fs::write(
        out,
        serde_json::to_string_pretty(&Value::Object(summary)).unwrap() + "\n",
    )
    .unwrap();
}
