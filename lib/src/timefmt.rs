//! Timestamps as pi writes them: ISO-8601 UTC with milliseconds and `Z`
//! (JavaScript's `toISOString()`), and epoch milliseconds inside messages;
//! and durations as a command line writes them (`90`, `90s`, `10m`,
//! `1h30m`).

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The current time as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn now_iso() -> String {
    iso_from_ms(now_ms())
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

/// Formats epoch milliseconds like `toISOString()`.
pub fn iso_from_ms(ms: i64) -> String {
    match iso_digits(ms) {
        Some(b) => b.iter().map(|&c| char::from(c)).collect(),
        None => iso_from_ms_slow(ms),
    }
}

/// Epoch ms from 1970 to the end of year 9999 written with plain
/// arithmetic (days to a civil date by 400-year eras), a listing formats
/// thousands of them; `None` outside that range.
fn iso_digits(ms: i64) -> Option<[u8; 24]> {
    if !(0..253_402_300_800_000).contains(&ms) {
        return None;
    }
    let (days, in_day) = (ms / 86_400_000, ms % 86_400_000);
    // Days since 0000-03-01, so a leap day ends its year.
    let z = days + 719_468;
    let (era, doe) = (z / 146_097, z % 146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let mut out = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut v: i64| {
        for i in (at..at + width).rev() {
            out[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 4, year);
    put(5, 2, month);
    put(8, 2, day);
    put(11, 2, in_day / 3_600_000);
    put(14, 2, in_day / 60_000 % 60);
    put(17, 2, in_day / 1000 % 60);
    put(20, 3, in_day % 1000);
    Some(out)
}

fn iso_from_ms_slow(ms: i64) -> String {
    let dt = OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        dt.year(),
        dt.month() as u8,
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second(),
        dt.millisecond()
    )
}

/// Parses an ISO-8601 / RFC 3339 timestamp into epoch milliseconds.
pub fn parse_iso_ms(s: &str) -> Option<i64> {
    OffsetDateTime::parse(s, &Rfc3339)
        .ok()
        .map(|dt| (dt.unix_timestamp_nanos() / 1_000_000) as i64)
}

/// A short local-free rendering for tables: `YYYY-MM-DD HH:MM` (UTC).
pub fn short_from_ms(ms: i64) -> String {
    let iso = iso_from_ms(ms);
    format!("{} {}", &iso[..10], &iso[11..16])
}

/// Parses a duration: a number of seconds (`90`, `2.5`), or numbers each
/// with a unit `ms`, `s`, `m` or `h` (`90s`, `10m`, `1h30m`). More than
/// zero, at most a year.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let bad = || {
        format!("invalid duration \"{text}\" (use seconds, or a number with s, m or h: 90, 90s, 10m, 1h)")
    };
    let t = text.trim();
    if t.is_empty() {
        return Err(bad());
    }
    let mut secs = 0f64;
    let mut rest = t;
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..n].parse().map_err(|_| bad())?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..u] {
            "" if n == t.len() => 1.0,
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        rest = &rest[u..];
        secs += value * scale;
    }
    if !(secs > 0.0 && secs <= 366.0 * 86400.0) {
        return Err(format!(
            "invalid duration \"{text}\": must be more than 0 and at most a year"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// A duration in the words [`parse_duration`] reads: `90s`, `10m`,
/// `1h30m`, `1.5s`.
pub fn duration_words(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) {
        return format!("{}s", d.as_secs_f64());
    }
    let s = d.as_secs();
    let (h, m, sec) = (s / 3600, (s % 3600) / 60, s % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if sec > 0 || out.is_empty() {
        out.push_str(&format!("{sec}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates_by_arithmetic_are_the_time_crates() {
        let mut cases: Vec<i64> = vec![
            0,
            1,
            999,
            86_399_999,
            86_400_000,
            951_782_400_000,     // 2000-02-29
            951_868_800_000,     // 2000-03-01
            4_107_542_400_000,   // 2100-03-01
            1_767_225_600_000,   // 2026-01-01
            253_402_300_799_999, // 9999-12-31T23:59:59.999Z
            253_402_300_800_000,
            -1,
            i64::MIN,
            i64::MAX,
        ];
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push((x % 253_402_300_800_000) as i64);
            cases.push((x % 4_200_000_000_000) as i64);
        }
        for ms in cases {
            assert_eq!(iso_from_ms(ms), iso_from_ms_slow(ms), "{ms}");
        }
        assert_eq!(iso_from_ms(951_782_400_123), "2000-02-29T00:00:00.123Z");
    }

    #[test]
    fn durations_read_and_written() {
        use std::time::Duration;
        for (text, secs) in [
            ("90", 90.0),
            ("90s", 90.0),
            ("10m", 600.0),
            ("1h", 3600.0),
            ("1h30m", 5400.0),
            ("2.5", 2.5),
            ("1500ms", 1.5),
            (" 2m ", 120.0),
        ] {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_secs_f64(secs)),
                "{text}"
            );
        }
        for bad in ["", "0", "-5", "10x", "m", "1h 30m", "5d", "1e3", "400d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(duration_words(Duration::from_secs(90)), "1m30s");
        assert_eq!(duration_words(Duration::from_secs(3600)), "1h");
        assert_eq!(duration_words(Duration::from_millis(1500)), "1.5s");
        assert_eq!(duration_words(Duration::from_secs(5)), "5s");
    }

    #[test]
    fn iso_round_trip() {
        let ms = 1_773_614_418_123;
        let s = iso_from_ms(ms);
        assert_eq!(s, "2026-03-15T22:40:18.123Z");
        assert_eq!(parse_iso_ms(&s), Some(ms));
    }
}
