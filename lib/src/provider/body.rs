//! A request body built field by field and written straight to bytes. Each
//! value is serialised the moment it is inserted, from whatever the caller
//! holds (borrowed message text, tool schemas, small built values), so a
//! request never copies the conversation or the tool list into a JSON tree
//! first. Keys keep their first insertion's place; inserting a key again
//! replaces its value there, as a JSON object map does.

use serde::Serialize;

/// An ordered JSON object of already serialised values.
#[derive(Debug, Default)]
pub(crate) struct Body {
    fields: Vec<(String, String)>,
}

impl Body {
    /// An empty body (`{}`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` to `value` serialised.
    pub fn insert<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) {
        // Every value a request holds is JSON-representable (string keys,
        // finite numbers); `null` stands in should one not be.
        let raw = serde_json::to_string(value).unwrap_or_else(|_| "null".into());
        self.insert_raw(key, raw);
    }

    /// Sets `key` to `raw`, text that is already one JSON value.
    pub fn insert_raw(&mut self, key: &str, raw: String) {
        match self.fields.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = raw,
            None => self.fields.push((key.to_string(), raw)),
        }
    }

    /// The body as JSON bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        let len: usize = self.fields.iter().map(|(k, v)| k.len() + v.len() + 4).sum();
        let mut out = Vec::with_capacity(len + 2);
        out.push(b'{');
        for (i, (k, v)) in self.fields.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            // Writing a string into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut out, k.as_str());
            out.push(b':');
            out.extend_from_slice(v.as_bytes());
        }
        out.push(b'}');
        out
    }

    /// The bytes, leaving the body as it is.
    #[cfg(test)]
    pub fn clone_bytes(&self) -> Vec<u8> {
        Body {
            fields: self.fields.clone(),
        }
        .into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn writes_fields_in_insertion_order_and_replaces_in_place() {
        let mut b = Body::new();
        assert_eq!(b.clone_bytes(), b"{}");
        b.insert("model", "m\"1");
        b.insert("stream", &true);
        b.insert("n", &json!({"z": 1, "a": [null]}));
        b.insert("model", "m2");
        b.insert_raw("k\n", "[]".into());
        assert_eq!(
            String::from_utf8(b.into_bytes()).unwrap(),
            r#"{"model":"m2","stream":true,"n":{"z":1,"a":[null]},"k\n":[]}"#
        );
    }
}
