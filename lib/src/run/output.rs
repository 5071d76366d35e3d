//! Structured output (`--output-schema FILE`): the schema is read and
//! compiled before anything else runs (a missing, malformed or invalid
//! schema is a usage error naming the file); the model is told the format
//! in a system-prompt section and, where its API can, constrained to it
//! ([`crate::provider::schema`]); the final answer is validated with the
//! `jsonschema` crate (draft 2020-12 unless the schema's `$schema` names
//! another, such as draft-07; formats are checked). A mismatch is answered
//! with one user message listing the errors and repeating the schema, up
//! to `--output-retries` times.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::cli::CliError;
use crate::provider::schema::ResponseSchema;

/// `--output-retries` when not given.
pub const DEFAULT_RETRIES: u32 = 2;

/// The largest schema file read (a schema is small; anything bigger is a
/// mistake, refused instead of read whole).
const MAX_SCHEMA_BYTES: u64 = 4 << 20;

/// The most validation errors shown to the model or on stderr.
const MAX_ERRORS: usize = 20;

/// A loaded `--output-schema`.
pub struct OutputSpec {
    pub path: PathBuf,
    pub schema: Value,
    validator: jsonschema::Validator,
    /// The schema as each API can take it.
    pub native: Arc<ResponseSchema>,
    pub retries: u32,
}

impl std::fmt::Debug for OutputSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputSpec")
            .field("path", &self.path)
            .field("retries", &self.retries)
            .finish()
    }
}

/// Reads and compiles the schema at `path`.
pub fn load(path: &Path, retries: u32) -> Result<OutputSpec, CliError> {
    let shown = path.display();
    let text = crate::regular_file::read_config(path, MAX_SCHEMA_BYTES)
        .map_err(|e| CliError::input(format!("--output-schema {shown}: {e}")))?
        .ok_or_else(|| CliError::input(format!("--output-schema {shown}: no such file")))?;
    let schema: Value = serde_json::from_str(&text).map_err(|e| {
        CliError::input(format!(
            "--output-schema {shown}:{}:{}: not JSON: {e}",
            e.line(),
            e.column()
        ))
    })?;
    if !(schema.is_object() || schema.is_boolean()) {
        return Err(CliError::input(format!(
            "--output-schema {shown}: a JSON Schema is an object (or true/false)"
        )));
    }
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .map_err(|e| {
            CliError::input(format!(
                "--output-schema {shown}: not a valid JSON Schema: {e}"
            ))
        })?;
    Ok(OutputSpec {
        path: path.to_path_buf(),
        native: Arc::new(ResponseSchema::new(&schema)),
        schema,
        validator,
        retries,
    })
}

/// The JSON document an answer holds: the whole text, or the body of the
/// one fenced code block it consists of (```json … ```).
pub fn document_of(answer: &str) -> Result<Value, String> {
    let t = answer.trim();
    let body = t
        .strip_prefix("```")
        .and_then(|rest| rest.strip_suffix("```"))
        .map(|inner| match inner.split_once('\n') {
            // The info string (`json`) ends the fence's first line.
            Some((info, body)) if !info.contains('{') && !info.contains('[') => body,
            _ => inner,
        })
        .unwrap_or(t);
    if body.trim().is_empty() {
        return Err("the answer is empty, not a JSON document".into());
    }
    serde_json::from_str(body.trim())
        .map_err(|e| format!("the answer is not a JSON document ({e})"))
}

impl OutputSpec {
    /// The validated document of `answer`, or what is wrong with it (one
    /// line per error, each with its place in the document).
    pub fn check(&self, answer: &str) -> Result<Value, Vec<String>> {
        let doc = document_of(answer).map_err(|e| vec![e])?;
        let errors: Vec<String> = self
            .validator
            .iter_errors(&doc)
            .take(MAX_ERRORS)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "/".to_string() } else { at };
                format!("{at}: {e}")
            })
            .collect();
        if errors.is_empty() {
            Ok(doc)
        } else {
            Err(errors)
        }
    }

    /// The schema, pretty-printed for the model.
    fn schema_text(&self) -> String {
        serde_json::to_string_pretty(&self.schema).unwrap_or_default()
    }

    /// The system-prompt section telling the model the answer's format.
    pub fn instructions(&self) -> String {
        format!(
            "# Final answer format\n\nYour final answer (your last message, once you need no more tool calls) must be exactly one JSON document, with no other text around it, that validates against this JSON Schema:\n\n```json\n{}\n```",
            self.schema_text()
        )
    }

    /// The user message asking for a corrected answer.
    pub fn retry_message(&self, errors: &[String]) -> String {
        let list: Vec<String> = errors.iter().map(|e| format!("- {e}")).collect();
        format!(
            "Your final answer does not match the required JSON Schema:\n{}\n\nAnswer again with only a JSON document (no other text) that validates against this JSON Schema:\n\n```json\n{}\n```",
            list.join("\n"),
            self.schema_text()
        )
    }
}

/// Checks before the run that `--output-last-message FILE` can be written:
/// its folder exists and it is not a folder itself.
pub fn check_last_message_path(path: &Path) -> Result<(), CliError> {
    let shown = path.display();
    if path.is_dir() {
        return Err(CliError::input(format!(
            "--output-last-message {shown}: is a directory"
        )));
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return Err(CliError::input(format!(
            "--output-last-message {shown}: the folder {} does not exist",
            parent.display()
        )));
    }
    Ok(())
}

/// Writes the final answer to `path` whole (a reader never sees half).
pub fn write_last_message(path: &Path, text: &str) -> Result<(), String> {
    crate::atomic_file::replace_atomic(path, text.as_bytes(), 0o666)
        .map_err(|e| format!("--output-last-message {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(schema: Value) -> OutputSpec {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.json");
        std::fs::write(&p, schema.to_string()).unwrap();
        load(&p, 2).unwrap()
    }

    #[test]
    fn answers_are_checked_with_their_places() {
        let s = spec(
            json!({"type": "object", "properties": {"status": {"enum": ["ok", "failed"]},
            "n": {"type": "integer"}}, "required": ["status"]}),
        );
        assert_eq!(
            s.check(r#"{"status":"ok","n":3}"#),
            Ok(json!({"status": "ok", "n": 3}))
        );
        assert_eq!(
            s.check("```json\n{\"status\": \"failed\"}\n```"),
            Ok(json!({"status": "failed"}))
        );
        let e = s.check(r#"{"status":"maybe","n":"x"}"#).unwrap_err();
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e.iter().any(|l| l.starts_with("/status: ")), "{e:?}");
        assert!(e.iter().any(|l| l.starts_with("/n: ")), "{e:?}");
        let e = s.check("{}").unwrap_err();
        assert!(e[0].starts_with("/: ") && e[0].contains("status"), "{e:?}");
        let e = s.check("Sure! Here it is: {}").unwrap_err();
        assert!(e[0].contains("not a JSON document"), "{e:?}");
        assert!(s.check("  ").unwrap_err()[0].contains("empty"));
        let msg = s.retry_message(&e);
        assert!(msg.contains("- the answer is not a JSON document"), "{msg}");
        assert!(msg.contains("\"required\""), "{msg}");
        assert!(s.instructions().contains("\"status\""));
    }

    #[test]
    fn draft_07_is_read_by_its_schema_key_and_formats_are_checked() {
        let s = spec(json!({"$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object", "properties": {"when": {"type": "string", "format": "date"}},
            "dependencies": {"a": ["b"]}}));
        assert!(s.check(r#"{"when":"2026-01-02"}"#).is_ok());
        assert!(s.check(r#"{"when":"soon"}"#).is_err());
        assert!(
            s.check(r#"{"a":1}"#).is_err(),
            "draft-07 dependencies apply"
        );
    }

    #[test]
    fn bad_schema_files_are_usage_errors_naming_the_file() {
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("none.json");
        let e = load(&missing, 2).unwrap_err();
        assert_eq!(e.code, crate::cli::EXIT_USAGE);
        assert!(e.message.contains("none.json"), "{}", e.message);
        let p = d.path().join("bad.json");
        std::fs::write(&p, "{\n  \"type\": \n").unwrap();
        let e = load(&p, 2).unwrap_err();
        assert!(e.message.contains("bad.json:3:"), "{}", e.message);
        std::fs::write(&p, r#"{"type": "strnig"}"#).unwrap();
        let e = load(&p, 2).unwrap_err();
        assert!(
            e.message.contains("not a valid JSON Schema"),
            "{}",
            e.message
        );
        std::fs::write(&p, r#"[1]"#).unwrap();
        assert!(load(&p, 2).is_err());
        std::fs::write(&p, r#"{"$ref": "https://example.invalid/s.json"}"#).unwrap();
        assert!(load(&p, 2).is_err(), "nothing is fetched");
    }

    #[test]
    fn the_last_message_file_needs_an_existing_folder() {
        let d = tempfile::tempdir().unwrap();
        assert!(check_last_message_path(&d.path().join("out.txt")).is_ok());
        assert!(check_last_message_path(&d.path().join("no/out.txt")).is_err());
        assert!(check_last_message_path(d.path()).is_err());
        let f = d.path().join("x.txt");
        write_last_message(&f, "done\n").unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "done\n");
    }
}
