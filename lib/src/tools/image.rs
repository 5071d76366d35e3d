//! Images for `read`, as pi 1.6.0 prepares them (setting `images.autoResize`,
//! default true): detection by magic bytes, BMP converted to PNG, and images
//! larger than 2000×2000 or whose base64 exceeds 4.5 MiB re-encoded (PNG or
//! JPEG, whichever is smaller; JPEG quality 85/70/55/40, then scale steps
//! 0.75/0.5/0.35/0.25) with a note that maps coordinates back.
//!
//! Observed rules (black box, pi 1.6.0):
//! * an image within both limits is returned byte for byte, but only if it
//!   decodes: an undecodable one is omitted with a note;
//! * the fit is sequential: width first (`h = round(h·2000/w)`), then height;
//! * once re-encoded the dimension note is always added, even when the size
//!   did not change, with `S = original width / displayed width` rounded
//!   half-up to two decimals (JavaScript `toFixed(2)`);
//! * the text names the mime type actually sent; a BMP adds
//!   `[Image converted from image/bmp to <mime>.]` before the dimension note.

use std::io::Cursor;

use base64::Engine;
use image::codecs::jpeg::JpegEncoder;
use image::codecs::png::{CompressionType, FilterType as PngFilter, PngEncoder};
use image::imageops::FilterType;
use image::{DynamicImage, ImageEncoder, ImageFormat};

/// Largest width and height sent as is.
pub const MAX_DIMENSION: u32 = 2000;
/// Largest base64 length sent (4.5 MiB).
pub const MAX_BASE64_LEN: usize = 4_718_592;
/// JPEG qualities tried at each scale, best first.
pub const JPEG_QUALITIES: [u8; 4] = [85, 70, 55, 40];
/// Scale steps applied to the fitted size.
pub const SCALE_STEPS: [f64; 5] = [1.0, 0.75, 0.5, 0.35, 0.25];

/// Note when an image cannot be decoded or made small enough.
pub const OMITTED_RESIZE: &str =
    "[Image omitted: could not be resized below the inline image size limit.]";
/// Note when a BMP cannot be decoded.
pub const OMITTED_CONVERT: &str =
    "[Image omitted: could not be converted to a supported inline image format.]";

/// The MIME type of an image `read` handles, from its first bytes.
pub fn detect_mime(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(&[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A]) {
        Some("image/png")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else if is_bmp(bytes) {
        Some("image/bmp")
    } else {
        None
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// A plausible BMP header: `BM`, a known DIB header size, the pixel offset
/// past the headers, one plane and a valid bit depth (what pi accepts: a
/// text file starting with `BM` stays text; zero width/height or unknown
/// compression are detected but fail to convert).
fn is_bmp(b: &[u8]) -> bool {
    if !b.starts_with(b"BM") {
        return false;
    }
    let (Some(offset), Some(dib)) = (u32_at(b, 10), u32_at(b, 14)) else {
        return false;
    };
    if !matches!(dib, 12 | 40 | 52 | 56 | 64 | 108 | 124) || offset < 14 + dib {
        return false;
    }
    let (planes, bpp) = if dib == 12 {
        (u16_at(b, 22), u16_at(b, 24))
    } else {
        (u16_at(b, 26), u16_at(b, 28))
    };
    planes == Some(1) && matches!(bpp, Some(1 | 4 | 8 | 16 | 24 | 32))
}

/// What `read` returns for an image: the text block and, unless omitted,
/// the image (base64 data and MIME type).
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedImage {
    pub text: String,
    pub image: Option<(String, String)>,
}

/// An image prepared for a prompt's `@file` (pi 1.6.0): what the BMP
/// conversion says goes inside the `<file>` tag, what the fitting says
/// goes after the prompt's text.
#[derive(Debug, Clone, PartialEq)]
pub struct Attachment {
    /// `[Image converted from image/bmp to image/png.]`, or the note that
    /// the conversion failed.
    pub conversion_note: Option<String>,
    /// The dimension note of a re-encoded image, or the note that it could
    /// not be made small enough.
    pub resize_note: Option<String>,
    /// Base64 data and MIME type, unless omitted.
    pub image: Option<(String, String)>,
}

/// The stages an image goes through: BMP converted to PNG, then fitted.
enum Outcome {
    /// A BMP that does not decode or encode.
    ConversionFailed,
    /// Fitting was needed but the image does not decode or cannot be made
    /// small enough (`mime`: the type it had before fitting).
    ResizeFailed { mime: String },
    /// Sent as it is (after any BMP conversion).
    Unchanged { data: Vec<u8>, mime: String },
    /// Re-encoded; `note` maps coordinates back.
    Resized {
        data: Vec<u8>,
        mime: &'static str,
        note: String,
    },
}

fn base64_len(n: usize) -> usize {
    n.div_ceil(3) * 4
}

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn converted_note(to: &str) -> String {
    format!("[Image converted from image/bmp to {to}.]")
}

/// Runs the stages; also says whether a BMP was converted.
fn stages(bytes: &[u8], mime: &str, auto_resize: bool) -> (bool, Outcome) {
    let mut decoded = None;
    let mut data = std::borrow::Cow::Borrowed(bytes);
    let mut mime = mime.to_string();
    let converted = mime == "image/bmp";
    if converted {
        let Some(img) = decode(bytes, Some(ImageFormat::Bmp)) else {
            return (true, Outcome::ConversionFailed);
        };
        let Some(png) = encode_png(&img) else {
            return (true, Outcome::ConversionFailed);
        };
        data = std::borrow::Cow::Owned(png);
        mime = "image/png".into();
        decoded = Some(img);
    }
    let unchanged = |data: std::borrow::Cow<[u8]>, mime: String| Outcome::Unchanged {
        data: data.into_owned(),
        mime,
    };
    if !auto_resize {
        return (converted, unchanged(data, mime));
    }
    let img = match decoded {
        Some(img) => img,
        None => match decode(&data, ImageFormat::from_mime_type(&mime)) {
            Some(img) => img,
            None => return (converted, Outcome::ResizeFailed { mime }),
        },
    };
    let (w, h) = (img.width(), img.height());
    if w <= MAX_DIMENSION && h <= MAX_DIMENSION && base64_len(data.len()) <= MAX_BASE64_LEN {
        return (converted, unchanged(data, mime));
    }
    let Some((out, out_mime, dw, dh)) = shrink(&img) else {
        return (converted, Outcome::ResizeFailed { mime });
    };
    let note = format!(
        "[Image: original {w}x{h}, displayed at {dw}x{dh}. Multiply coordinates by {} to map to original image.]",
        to_fixed2(f64::from(w) / f64::from(dw))
    );
    (
        converted,
        Outcome::Resized {
            data: out,
            mime: out_mime,
            note,
        },
    )
}

/// Prepares the bytes of an image whose type `mime` came from
/// [`detect_mime`] like pi 1.6.0's `read` does.
pub fn prepare(bytes: &[u8], mime: &str, auto_resize: bool) -> PreparedImage {
    let omitted = |mime: &str, note: &str| PreparedImage {
        text: format!("Read image file [{mime}]\n{note}"),
        image: None,
    };
    let (converted, outcome) = stages(bytes, mime, auto_resize);
    let conversion = |final_mime: &str| {
        if converted {
            format!("\n{}", converted_note(final_mime))
        } else {
            String::new()
        }
    };
    match outcome {
        Outcome::ConversionFailed => omitted(mime, OMITTED_CONVERT),
        Outcome::ResizeFailed { mime } => omitted(&mime, OMITTED_RESIZE),
        Outcome::Unchanged { data, mime } => PreparedImage {
            text: format!("Read image file [{mime}]{}", conversion(&mime)),
            image: Some((b64(&data), mime)),
        },
        Outcome::Resized { data, mime, note } => PreparedImage {
            text: format!("Read image file [{mime}]{}\n{note}", conversion(mime)),
            image: Some((b64(&data), mime.to_string())),
        },
    }
}

/// Prepares an image given to a prompt as `@file` like pi 1.6.0 does: the
/// same conversion and fitting as `read`, but the notes split between the
/// `<file>` tag (conversion, which always yields PNG) and the prompt's end
/// (fitting).
pub fn prepare_attachment(bytes: &[u8], mime: &str, auto_resize: bool) -> Attachment {
    let (converted, outcome) = stages(bytes, mime, auto_resize);
    let conversion_note = converted.then(|| converted_note("image/png"));
    match outcome {
        Outcome::ConversionFailed => Attachment {
            conversion_note: Some(OMITTED_CONVERT.to_string()),
            resize_note: None,
            image: None,
        },
        Outcome::ResizeFailed { .. } => Attachment {
            conversion_note,
            resize_note: Some(OMITTED_RESIZE.to_string()),
            image: None,
        },
        Outcome::Unchanged { data, mime } => Attachment {
            conversion_note,
            resize_note: None,
            image: Some((b64(&data), mime)),
        },
        Outcome::Resized { data, mime, note } => Attachment {
            conversion_note,
            resize_note: Some(note),
            image: Some((b64(&data), mime.to_string())),
        },
    }
}

fn decode(bytes: &[u8], format: Option<ImageFormat>) -> Option<DynamicImage> {
    let reader = match format {
        Some(f) => image::ImageReader::with_format(Cursor::new(bytes), f),
        None => image::ImageReader::new(Cursor::new(bytes))
            .with_guessed_format()
            .ok()?,
    };
    reader.decode().ok()
}

/// JavaScript `Math.round` for the non-negative values used here.
fn js_round(x: f64) -> u32 {
    (x + 0.5).floor().max(0.0) as u32
}

/// The size pi fits an image into 2000×2000 with: width first, then height.
pub fn fit(w: u32, h: u32) -> (u32, u32) {
    let (mut w, mut h) = (w, h);
    if w > MAX_DIMENSION {
        h = js_round(f64::from(h) * f64::from(MAX_DIMENSION) / f64::from(w));
        w = MAX_DIMENSION;
    }
    if h > MAX_DIMENSION {
        w = js_round(f64::from(w) * f64::from(MAX_DIMENSION) / f64::from(h));
        h = MAX_DIMENSION;
    }
    (w.max(1), h.max(1))
}

/// The first encoding within [`MAX_BASE64_LEN`]: at each scale step the
/// smaller of PNG and JPEG 85, then JPEG at the lower qualities.
fn shrink(img: &DynamicImage) -> Option<(Vec<u8>, &'static str, u32, u32)> {
    let (fw, fh) = fit(img.width(), img.height());
    for scale in SCALE_STEPS {
        let w = js_round(f64::from(fw) * scale).max(1);
        let h = js_round(f64::from(fh) * scale).max(1);
        let resized = if (w, h) == (img.width(), img.height()) {
            img.clone()
        } else {
            img.resize_exact(w, h, FilterType::Lanczos3)
        };
        let rgb = DynamicImage::ImageRgb8(resized.to_rgb8());
        for (i, quality) in JPEG_QUALITIES.into_iter().enumerate() {
            let jpeg = encode_jpeg(&rgb, quality);
            let best = if i == 0 {
                match (encode_png(&resized), jpeg) {
                    (Some(p), Some(j)) if j.len() < p.len() => Some((j, "image/jpeg")),
                    (Some(p), _) => Some((p, "image/png")),
                    (None, Some(j)) => Some((j, "image/jpeg")),
                    (None, None) => None,
                }
            } else {
                jpeg.map(|j| (j, "image/jpeg"))
            };
            if let Some((data, mime)) = best {
                if base64_len(data.len()) <= MAX_BASE64_LEN {
                    return Some((data, mime, w, h));
                }
            }
        }
    }
    None
}

fn encode_png(img: &DynamicImage) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let enc = PngEncoder::new_with_quality(&mut out, CompressionType::Default, PngFilter::Adaptive);
    img.write_with_encoder(enc).ok()?;
    Some(out)
}

fn encode_jpeg(rgb: &DynamicImage, quality: u8) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let enc = JpegEncoder::new_with_quality(&mut out, quality);
    enc.write_image(
        rgb.as_bytes(),
        rgb.width(),
        rgb.height(),
        rgb.color().into(),
    )
    .ok()?;
    Some(out)
}

/// JavaScript `x.toFixed(2)` for a positive `x`: the exact binary value
/// rounded half-up (Rust's formatting rounds ties to even).
pub fn to_fixed2(x: f64) -> String {
    // 60 decimals print the exact value of any f64 in the range used here.
    let exact = format!("{x:.60}");
    let Some((int, frac)) = exact.split_once('.') else {
        return format!("{x:.2}");
    };
    let digits: Vec<u32> = frac.chars().filter_map(|c| c.to_digit(10)).collect();
    let (Ok(int), [d1, d2, d3, ..]) = (int.parse::<u64>(), digits.as_slice()) else {
        return format!("{x:.2}");
    };
    let mut cents = int * 100 + u64::from(d1 * 10 + d2);
    // the rest is at least half a cent exactly when the third digit is >= 5
    if *d3 >= 5 {
        cents += 1;
    }
    format!("{}.{:02}", cents / 100, cents % 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_fixed_rounds_half_up() {
        assert_eq!(to_fixed2(1.125), "1.13");
        assert_eq!(to_fixed2(1.5), "1.50");
        assert_eq!(to_fixed2(1.0005), "1.00");
        assert_eq!(to_fixed2(1.4), "1.40");
        assert_eq!(to_fixed2(1.499_999), "1.50");
        assert_eq!(to_fixed2(1.005), "1.00"); // 1.00499999999999989...
        assert_eq!(to_fixed2(9.999), "10.00");
    }

    #[test]
    fn fit_is_sequential() {
        assert_eq!(fit(3000, 1500), (2000, 1000));
        assert_eq!(fit(3001, 1000), (2000, 666));
        assert_eq!(fit(7, 2999), (5, 2000));
        assert_eq!(fit(4000, 2999), (2000, 1500));
        assert_eq!(fit(2001, 2086), (1918, 2000));
        assert_eq!(fit(2000, 2000), (2000, 2000));
    }

    #[test]
    fn auto_resize_off_passes_images_through() {
        // A PNG signature with a truncated body: with resizing on, pi cannot
        // decode it and omits it; with `images.autoResize: false` the bytes
        // go to the model untouched.
        let bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR truncated";
        let on = prepare(bytes, "image/png", true);
        assert!(on.image.is_none() && on.text.contains("[Image omitted"));
        let off = prepare(bytes, "image/png", false);
        assert_eq!(off.text, "Read image file [image/png]");
        assert!(off.image.is_some());
    }

    #[test]
    fn bmp_detection() {
        assert!(!is_bmp(b"BMW is a car\n"));
        let mut h = vec![0u8; 54];
        h[..2].copy_from_slice(b"BM");
        h[10] = 54;
        h[14] = 40;
        h[26] = 1;
        h[28] = 24;
        assert!(is_bmp(&h));
        h[10] = 7;
        assert!(!is_bmp(&h));
        h[10] = 54;
        h[14] = 41;
        assert!(!is_bmp(&h));
    }
}
