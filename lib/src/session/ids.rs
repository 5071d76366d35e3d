//! Identifiers as pi makes them: UUIDs for sessions, the first 8 hex
//! characters of a fresh UUID v4 for entries (re-drawn on collision), and
//! the ids given to version-1 entries on migration, derived from the
//! session id and the entry's position so every load of the same file gives
//! the same ids (an id `show` printed still names the entry in `label`).

/// A new session id (UUID v7, as pi 1.x uses: sortable by creation time).
pub fn new_session_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A new 8-hex entry id for which `taken` is false; after 100 collisions a
/// full UUID.
pub fn new_entry_id(taken: impl Fn(&str) -> bool) -> String {
    for _ in 0..100 {
        let id = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
        if !taken(&id) {
            return id;
        }
    }
    uuid::Uuid::new_v4().to_string()
}

/// The id of the `n`-th entry (0-based) of version-1 session `session_id`:
/// 8 hex characters from a hash of both, re-hashed with a counter while
/// `taken` says the id is in use. Deterministic for a given file.
pub fn derived_entry_id(session_id: &str, n: usize, taken: impl Fn(&str) -> bool) -> String {
    let base = fnv1a(session_id.as_bytes(), 0xcbf2_9ce4_8422_2325);
    for salt in 0u64.. {
        let h = mix(base ^ mix((n as u64) << 16 | salt));
        let id = format!("{:08x}", h >> 32);
        if !taken(&id) {
            return id;
        }
    }
    unreachable!("an unbounded counter always finds a free id")
}

fn fnv1a(bytes: &[u8], mut h: u64) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// SplitMix64's finaliser: spreads every input bit over the output.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn derived_ids_are_stable_distinct_and_dodge_collisions() {
        let a = derived_entry_id("s", 0, |_| false);
        assert_eq!(a, derived_entry_id("s", 0, |_| false));
        assert_ne!(a, derived_entry_id("s", 1, |_| false));
        assert_ne!(a, derived_entry_id("t", 0, |_| false));
        assert_eq!(a.len(), 8);
        let other = derived_entry_id("s", 0, |id| id == a);
        assert_ne!(other, a);
        let mut seen = HashSet::new();
        for n in 0..20_000 {
            let id = derived_entry_id("s", n, |id| seen.contains(id));
            assert!(seen.insert(id));
        }
    }
}
