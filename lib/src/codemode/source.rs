//! A codemode script's input: raw JavaScript whose first line may be an
//! options line, `// @options: {"max_output_tokens": N, "timeout_ms": N}`.
//! The options line is replaced by an empty line (line numbers in stack
//! traces stay those of the input); empty input, invalid JSON, unknown
//! fields, an options line without code, or an options line on any other
//! line are refused before the script runs, with pi's texts.

use serde_json::Value;

/// The output budget when the options line sets none.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 10_000;

/// A parsed input.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    pub code: String,
    pub max_output_tokens: u64,
    pub timeout_ms: Option<u64>,
}

const MARK: &str = "// @options:";

fn options_line(line: &str) -> Option<&str> {
    line.trim_start_matches([' ', '\t']).strip_prefix(MARK)
}

/// Parses `input`; `Err` is the text of the tool's error result.
pub fn parse(input: &str) -> Result<Source, String> {
    if input.trim().is_empty() {
        return Err("Expected JavaScript source text (non-empty). Provide JS only, optionally with a first line `// @options: {\"max_output_tokens\": 1000}`.".into());
    }
    let mut lines = input.split('\n');
    let first = lines.next().unwrap_or("");
    for (i, l) in input.split('\n').enumerate().skip(1) {
        if options_line(l).is_some() {
            return Err(format!(
                "The // @options: line must be the first line of the input; found one on line {}",
                i + 1
            ));
        }
    }
    let mut src = Source {
        code: input.to_string(),
        max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
        timeout_ms: None,
    };
    let Some(json) = options_line(first.trim_end_matches('\r')) else {
        return Ok(src);
    };
    let rest: Vec<&str> = lines.collect();
    if rest.iter().all(|l| l.trim().is_empty()) {
        return Err(
            "The @options line must be followed by JavaScript source on subsequent lines".into(),
        );
    }
    let v: Value = serde_json::from_str(json.trim()).map_err(|e| {
        format!("@options must be valid JSON with supported fields `max_output_tokens` and `timeout_ms`: {e}")
    })?;
    let Value::Object(m) = v else {
        return Err("@options must be valid JSON with supported fields `max_output_tokens` and `timeout_ms`: expected an object".into());
    };
    for (k, v) in &m {
        let n = v.as_f64().filter(|n| *n >= 0.0 && n.is_finite());
        match (k.as_str(), n) {
            ("max_output_tokens", Some(n)) => src.max_output_tokens = n as u64,
            ("timeout_ms", Some(n)) => src.timeout_ms = Some(n as u64),
            ("max_output_tokens" | "timeout_ms", None) => {
                return Err(format!(
                    "@options field `{k}` must be a non-negative number"
                ))
            }
            _ => {
                return Err(format!(
                    "@options only supports `max_output_tokens` and `timeout_ms`; got `{k}`"
                ))
            }
        }
    }
    src.code = format!("\n{}", rest.join("\n"));
    Ok(src)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_line_rules_as_pi() {
        let s = parse("// @options: {\"timeout_ms\": 300}\nwhile (true) {}").unwrap();
        assert_eq!(s.timeout_ms, Some(300));
        assert_eq!(s.max_output_tokens, 10_000);
        assert_eq!(s.code, "\nwhile (true) {}");
        assert!(parse("  \n")
            .unwrap_err()
            .starts_with("Expected JavaScript source text"));
        assert_eq!(
            parse("text('a');\n// @options: {\"timeout_ms\": 5}\n").unwrap_err(),
            "The // @options: line must be the first line of the input; found one on line 2"
        );
        assert_eq!(
            parse("// @options: {\"foo\": 1}\nreturn 1").unwrap_err(),
            "@options only supports `max_output_tokens` and `timeout_ms`; got `foo`"
        );
        assert!(parse("// @options: {bad}\nreturn 1")
            .unwrap_err()
            .starts_with("@options must be valid JSON"));
        assert_eq!(
            parse("// @options: {\"timeout_ms\": 100}").unwrap_err(),
            "The @options line must be followed by JavaScript source on subsequent lines"
        );
        assert_eq!(parse("return 1").unwrap().code, "return 1");
    }
}
