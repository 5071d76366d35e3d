//! How pi reads an extension's answer, where the toolkit must read it the
//! same way: a `tool_call` result blocks on any truthy `block` (JavaScript's
//! truthiness: `"yes"` and `1` block, `0`, `""` and `false` do not), and an
//! answer that is neither `null` nor an object is malformed, so the call is
//! blocked (fail closed).

use serde_json::Value;

/// JavaScript's truthiness of a JSON value: pi tests a `tool_call`
/// result's `block` as `if (result.block)`.
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// What one extension's `tool_call` answer says.
#[derive(Debug, PartialEq)]
pub enum ToolCallAnswer {
    /// Run the call as it is (as far as this extension goes).
    Nothing,
    /// Run it with these arguments.
    Input(Value),
    /// Do not run it; the error result's text.
    Block(String),
}

/// Reads a `tool_call` answer: `null`, or an object whose truthy `block`
/// blocks (pi blocks on any truthy value: `"yes"`, `1`, …) and whose
/// `input` object rewrites the arguments. Anything else is malformed: the
/// error says how, and the caller blocks (fail closed).
pub fn tool_call_answer(v: &Value) -> Result<ToolCallAnswer, String> {
    let Value::Object(m) = v else {
        if v.is_null() {
            return Ok(ToolCallAnswer::Nothing);
        }
        let mut shown = v.to_string();
        if shown.len() > 80 {
            let cut = (0..=80)
                .rev()
                .find(|&i| shown.is_char_boundary(i))
                .unwrap_or(0);
            shown.truncate(cut);
            shown.push('…');
        }
        return Err(format!(
            "answered tool_call with {shown}, not null or an object"
        ));
    };
    if m.get("block").is_some_and(truthy) {
        let reason = m
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or("Tool execution was blocked");
        return Ok(ToolCallAnswer::Block(reason.to_string()));
    }
    match m.get("input") {
        None | Some(Value::Null) => Ok(ToolCallAnswer::Nothing),
        Some(i @ Value::Object(_)) => Ok(ToolCallAnswer::Input(i.clone())),
        Some(other) => Err(format!(
            "answered tool_call with an input that is not an object ({})",
            match other {
                Value::Array(_) => "an array",
                Value::String(_) => "a string",
                Value::Number(_) => "a number",
                _ => "a boolean",
            }
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn any_truthy_block_blocks() {
        for v in [
            json!(true),
            json!("yes"),
            json!("no"),
            json!(1),
            json!(-0.5),
            json!([]),
            json!({}),
        ] {
            assert_eq!(
                tool_call_answer(&json!({"block": v, "reason": "r"})),
                Ok(ToolCallAnswer::Block("r".into())),
                "{v}"
            );
        }
        assert_eq!(
            tool_call_answer(&json!({"block": 1})),
            Ok(ToolCallAnswer::Block("Tool execution was blocked".into()))
        );
        for v in [json!(false), json!(0), json!(0.0), json!(""), json!(null)] {
            assert_eq!(
                tool_call_answer(&json!({"block": v})),
                Ok(ToolCallAnswer::Nothing),
                "{v}"
            );
        }
    }

    #[test]
    fn rewrites_and_malformed_answers() {
        assert_eq!(tool_call_answer(&json!(null)), Ok(ToolCallAnswer::Nothing));
        assert_eq!(
            tool_call_answer(&json!({"input": {"command": "ls"}})),
            Ok(ToolCallAnswer::Input(json!({"command": "ls"})))
        );
        for v in [
            json!("garbage"),
            json!(1),
            json!(true),
            json!([{"block": true}]),
        ] {
            let e = tool_call_answer(&v).unwrap_err();
            assert!(e.starts_with("answered tool_call with "), "{e}");
        }
        assert_eq!(
            tool_call_answer(&json!({"input": "rm -rf /"})),
            Err("answered tool_call with an input that is not an object (a string)".into())
        );
        let long = tool_call_answer(&json!("é".repeat(100))).unwrap_err();
        assert!(long.contains('…') && long.len() < 200, "{long}");
    }
}
