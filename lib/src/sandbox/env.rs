//! Which environment variables a sandboxed command does not get: names
//! that look secret (containing `KEY`, `SECRET`, `TOKEN`, `PASSWORD` or
//! `CREDENTIAL`, or starting with `AWS_`, case-insensitive) and every
//! provider key variable the model registry knows, unless `--env-keep` or
//! settings `envKeep` names them. Plain variables pass unchanged.

use std::ffi::{OsStr, OsString};

/// Parts of a name that make it look secret (compared upper-case).
const SECRET_PARTS: &[&str] = &["KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL"];

/// Name prefixes that make it secret (compared upper-case).
const SECRET_PREFIXES: &[&str] = &["AWS_"];

/// Whether the variable `name` is withheld, given the provider key
/// variables `provider_keys` and the names to keep.
pub fn is_hidden(name: &OsStr, provider_keys: &[String], keep: &[String]) -> bool {
    let Some(name) = name.to_str() else {
        // A name that is not UTF-8 cannot be named in envKeep; it passes
        // only when it looks harmless byte-wise.
        let upper = name.to_string_lossy().to_ascii_uppercase();
        return looks_secret(&upper);
    };
    if keep.iter().any(|k| k == name) {
        return false;
    }
    provider_keys.iter().any(|k| k == name) || looks_secret(&name.to_ascii_uppercase())
}

fn looks_secret(upper: &str) -> bool {
    SECRET_PARTS.iter().any(|p| upper.contains(p))
        || SECRET_PREFIXES.iter().any(|p| upper.starts_with(p))
}

/// The names in this process's environment that a sandboxed command does
/// not get, in environment order.
pub fn hidden_names(provider_keys: &[String], keep: &[String]) -> Vec<OsString> {
    std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| is_hidden(k, provider_keys, keep))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_hidden_unless_kept() {
        let providers = vec!["MY_PROVIDER_AUTH".to_string()];
        let keep = vec!["GITHUB_TOKEN".to_string()];
        let hidden = |n: &str| is_hidden(OsStr::new(n), &providers, &keep);
        for n in [
            "OPENAI_API_KEY",
            "api_key",
            "NPM_TOKEN",
            "client_secret",
            "DB_PASSWORD",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "AWS_REGION",
            "aws_profile",
            "MY_PROVIDER_AUTH",
        ] {
            assert!(hidden(n), "{n}");
        }
        for n in ["PATH", "HOME", "LANG", "GITHUB_TOKEN", "CI", "MY_AWS"] {
            assert!(!hidden(n), "{n}");
        }
    }
}
