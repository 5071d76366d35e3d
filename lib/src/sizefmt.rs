//! Byte counts as pi writes them in the texts a model or a user reads
//! (`512B`, `50.0KB`, `1.5MB`): tool results that were cut, and refusals of
//! files that are too large. On the ground floor with the other formats,
//! so the file helpers and the tools share it without importing each other.

/// pi's `formatSize`: bytes below 1 KiB as `512B`, then KiB and MiB with
/// one decimal (`50.0KB`, `1.5MB`).
pub fn format_size(bytes: usize) -> String {
    if bytes < 1024 {
        format!("{bytes}B")
    } else if bytes < 1024 * 1024 {
        format!("{:.1}KB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1}MB", bytes as f64 / (1024.0 * 1024.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_like_pi() {
        assert_eq!(format_size(0), "0B");
        assert_eq!(format_size(1023), "1023B");
        assert_eq!(format_size(51200), "50.0KB");
        assert_eq!(format_size(60000), "58.6KB");
        assert_eq!(format_size(3 * 1024 * 1024 / 2), "1.5MB");
    }
}
