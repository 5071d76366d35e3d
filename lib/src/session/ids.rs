//! Identifiers as pi makes them: UUIDs for sessions, the first 8 hex
//! characters of a fresh UUID v4 for entries (re-drawn on collision).

use std::collections::HashSet;

/// A new session id (UUID v7, as pi 1.x uses: sortable by creation time).
pub fn new_session_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A new 8-hex entry id not in `taken`; after 100 collisions a full UUID.
pub fn new_entry_id(taken: &HashSet<String>) -> String {
    for _ in 0..100 {
        let id = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
        if !taken.contains(&id) {
            return id;
        }
    }
    uuid::Uuid::new_v4().to_string()
}
