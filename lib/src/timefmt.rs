//! Timestamps as pi writes them: ISO-8601 UTC with milliseconds and `Z`
//! (JavaScript's `toISOString()`), and epoch milliseconds inside messages.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_round_trip() {
        let ms = 1_773_614_418_123;
        let s = iso_from_ms(ms);
        assert_eq!(s, "2026-03-15T22:40:18.123Z");
        assert_eq!(parse_iso_ms(&s), Some(ms));
    }
}
