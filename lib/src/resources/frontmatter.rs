//! A small YAML-subset parser for the frontmatter of SKILL.md files and
//! prompt templates — what pi 1.6.0 accepts in practice: `key: value` with
//! plain, single- and double-quoted scalars, `|` / `>` blocks (with `-` /
//! `+` chomping), plain scalars continued on indented lines, `#` comments,
//! block sequences, nested maps and flow `[...]` / `{...}` collections.
//!
//! There is no YAML crate in the tree and pi only reads a handful of string
//! and boolean keys, so this is deliberately small. What it cannot parse
//! is an error (pi reports the YAML error as a warning and skips the file).

use serde_json::{Map, Number, Value};

/// A file split into frontmatter and body.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The keys, or an empty map when there is no frontmatter.
    pub fields: Map<String, Value>,
    /// The text after the closing `---` (or the whole file without one).
    pub body: String,
    /// Whether the file had a frontmatter block at all.
    pub has_frontmatter: bool,
}

/// Why frontmatter could not be parsed (1-based line in the file).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message} at line {line}")]
pub struct FrontmatterError {
    pub message: String,
    pub line: usize,
}

/// Splits `text` (CRLF normalised) into frontmatter and body and parses the
/// frontmatter. A file not starting with `---` has no frontmatter; an
/// unterminated block is treated as no frontmatter too (as pi does).
pub fn parse(text: &str) -> Result<Parsed, FrontmatterError> {
    let text = normalize_newlines(text);
    let no_fm = |text: String| Parsed {
        fields: Map::new(),
        body: text,
        has_frontmatter: false,
    };
    if !text.starts_with("---") {
        return Ok(no_fm(text));
    }
    // The closing fence: the next line starting with `---`.
    let Some(end) = text[3..].find("\n---").map(|i| i + 3) else {
        return Ok(no_fm(text));
    };
    let yaml = match text[..end].find('\n') {
        Some(nl) => &text[nl + 1..end],
        None => "",
    };
    let after = &text[end + 4..];
    let body = match after.find('\n') {
        Some(i) => after[i + 1..].to_string(),
        None => String::new(),
    };
    let fields = parse_yaml(yaml)?;
    Ok(Parsed {
        fields,
        body,
        has_frontmatter: true,
    })
}

/// `\r\n` and lone `\r` to `\n`. (A leading BOM is the reader's job:
/// [`super::text`] drops exactly one, as pi does.)
pub fn normalize_newlines(text: &str) -> String {
    if text.contains('\r') {
        text.replace("\r\n", "\n").replace('\r', "\n")
    } else {
        text.to_string()
    }
}

struct Line<'a> {
    indent: usize,
    text: &'a str,
    no: usize,
}

/// Parses a YAML mapping document (the frontmatter between the fences).
pub fn parse_yaml(yaml: &str) -> Result<Map<String, Value>, FrontmatterError> {
    let lines: Vec<Line> = yaml
        .split('\n')
        .enumerate()
        .map(|(i, l)| {
            let trimmed = l.trim_start_matches(' ');
            Line {
                indent: l.len() - trimmed.len(),
                text: trimmed.trim_end(),
                no: i + 2,
            }
        })
        .collect();
    let mut pos = 0;
    skip_blank(&lines, &mut pos);
    if pos >= lines.len() {
        return Ok(Map::new());
    }
    let indent = lines[pos].indent;
    if lines[pos].text.starts_with("- ") || lines[pos].text == "-" {
        return Err(err("frontmatter is not a mapping", lines[pos].no));
    }
    let map = parse_map(&lines, &mut pos, indent, 0)?;
    skip_blank(&lines, &mut pos);
    if pos < lines.len() {
        return Err(err("bad indentation of a mapping entry", lines[pos].no));
    }
    Ok(map)
}

/// How deep collections may nest; deeper is an error, not a stack overflow.
const MAX_DEPTH: usize = 100;
const TOO_DEEP: &str = "collections nested too deeply";

/// Fails when a collection starting at line index `pos` is too deep.
fn nest(lines: &[Line], pos: usize, depth: usize) -> Result<(), FrontmatterError> {
    if depth > MAX_DEPTH {
        let no = lines.get(pos).map_or(1, |l| l.no);
        return Err(err(TOO_DEEP, no));
    }
    Ok(())
}

fn err(message: &str, line: usize) -> FrontmatterError {
    FrontmatterError {
        message: message.to_string(),
        line,
    }
}

fn is_blank(l: &Line) -> bool {
    l.text.is_empty() || l.text.starts_with('#')
}

fn skip_blank(lines: &[Line], pos: &mut usize) {
    while *pos < lines.len() && is_blank(&lines[*pos]) {
        *pos += 1;
    }
}

/// Splits `key: rest` (the colon must be followed by a space or end the line).
fn split_key(text: &str) -> Option<(String, &str)> {
    let (key, rest) = if let Some(q) = text.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let close = text[1..].find(q)? + 1;
        let rest = text[close + 1..].trim_start_matches(' ');
        let rest = rest.strip_prefix(':')?;
        (text[1..close].to_string(), rest)
    } else {
        let mut idx = None;
        let b = text.as_bytes();
        for i in 0..b.len() {
            if b[i] == b':' && (i + 1 == b.len() || b[i + 1] == b' ' || b[i + 1] == b'\t') {
                idx = Some(i);
                break;
            }
        }
        let i = idx?;
        (text[..i].trim_end().to_string(), &text[i + 1..])
    };
    if !rest.is_empty() && !rest.starts_with(' ') && !rest.starts_with('\t') {
        return None;
    }
    Some((key, rest.trim()))
}

fn parse_map(
    lines: &[Line],
    pos: &mut usize,
    indent: usize,
    depth: usize,
) -> Result<Map<String, Value>, FrontmatterError> {
    nest(lines, *pos, depth)?;
    let mut map = Map::new();
    loop {
        skip_blank(lines, pos);
        if *pos >= lines.len() || lines[*pos].indent < indent {
            return Ok(map);
        }
        let line = &lines[*pos];
        if line.indent > indent {
            return Err(err("bad indentation of a mapping entry", line.no));
        }
        let Some((key, rest)) = split_key(line.text) else {
            return Err(err("can not read a block mapping entry", line.no));
        };
        if map.contains_key(&key) {
            return Err(err("duplicated mapping key", line.no));
        }
        *pos += 1;
        let value = parse_value(lines, pos, indent, rest, line.no, depth)?;
        map.insert(key, value);
    }
}

/// The value after `key:` (or `- `): inline, a block scalar, or a nested
/// collection on the following, more indented lines.
fn parse_value(
    lines: &[Line],
    pos: &mut usize,
    parent_indent: usize,
    rest: &str,
    no: usize,
    depth: usize,
) -> Result<Value, FrontmatterError> {
    let rest = strip_comment(rest);
    if rest.starts_with('|') || rest.starts_with('>') {
        return block_scalar(lines, pos, parent_indent, rest, no);
    }
    if rest.is_empty() {
        let mut p = *pos;
        skip_blank(lines, &mut p);
        if p >= lines.len() || lines[p].indent < parent_indent {
            return Ok(Value::Null);
        }
        let l = &lines[p];
        let is_seq = l.text.starts_with("- ") || l.text == "-";
        if l.indent == parent_indent && is_seq {
            *pos = p;
            return parse_seq(lines, pos, l.indent, depth + 1).map(Value::Array);
        }
        if l.indent <= parent_indent {
            return Ok(Value::Null);
        }
        *pos = p;
        if is_seq {
            return parse_seq(lines, pos, l.indent, depth + 1).map(Value::Array);
        }
        if split_key(l.text).is_some() {
            return parse_map(lines, pos, l.indent, depth + 1).map(Value::Object);
        }
        // A plain scalar starting on the next line.
        return plain_multiline(lines, pos, parent_indent, "", no);
    }
    match rest.as_bytes()[0] {
        b'"' | b'\'' => quoted(lines, pos, parent_indent, rest, no),
        b'[' | b'{' => {
            let (v, used) = flow(rest, no, depth + 1)?;
            if !strip_comment(&rest[used..]).trim().is_empty() {
                return Err(err("unexpected text after a flow collection", no));
            }
            Ok(v)
        }
        b'&' | b'*' | b'!' => Err(err("anchors, aliases and tags are not supported", no)),
        _ => plain_multiline(lines, pos, parent_indent, rest, no),
    }
}

/// Removes a ` #comment` from a plain value.
fn strip_comment(s: &str) -> &str {
    let s = s.trim();
    if s.starts_with('#') {
        return "";
    }
    if s.starts_with('"') || s.starts_with('\'') {
        return s;
    }
    match s.find(" #").or_else(|| s.find("\t#")) {
        Some(i) => s[..i].trim_end(),
        None => s,
    }
}

/// A plain scalar, possibly continued on more-indented lines (folded with
/// single spaces).
fn plain_multiline(
    lines: &[Line],
    pos: &mut usize,
    parent_indent: usize,
    first: &str,
    no: usize,
) -> Result<Value, FrontmatterError> {
    let mut text = first.to_string();
    while *pos < lines.len() {
        let l = &lines[*pos];
        if l.text.is_empty() {
            // A blank line inside a plain scalar is a newline; only keep
            // going when more indented text follows.
            let mut p = *pos;
            while p < lines.len() && lines[p].text.is_empty() {
                p += 1;
            }
            if p < lines.len() && lines[p].indent > parent_indent && !text.is_empty() {
                for _ in *pos..p {
                    text.push('\n');
                }
                *pos = p;
                let t = strip_comment(lines[p].text);
                text.push_str(t);
                *pos += 1;
                continue;
            }
            break;
        }
        if l.indent <= parent_indent || l.text.starts_with('#') {
            break;
        }
        if split_key(l.text).is_some() && !text.is_empty() {
            return Err(err("implicit keys need to be on a single line", l.no));
        }
        let t = strip_comment(l.text);
        if !text.is_empty() && !text.ends_with('\n') {
            text.push(' ');
        }
        text.push_str(t);
        *pos += 1;
    }
    // `a: b: c` — YAML refuses a mapping inside a plain scalar.
    if text.contains(": ") || text.ends_with(':') {
        return Err(err(
            "nested mappings are not allowed in compact mappings",
            no,
        ));
    }
    Ok(plain_scalar(&text))
}

/// Resolves a plain scalar the YAML 1.2 core way: null, booleans, numbers,
/// else a string.
fn plain_scalar(s: &str) -> Value {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let numeric = s
        .trim_start_matches(['-', '+'])
        .chars()
        .all(|c| c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || c == '_')
        && s.chars().any(|c| c.is_ascii_digit());
    if numeric {
        if let Ok(i) = s.parse::<i64>() {
            return Value::Number(i.into());
        }
        if let Some(n) = s.parse::<f64>().ok().and_then(Number::from_f64) {
            return Value::Number(n);
        }
    }
    Value::String(s.to_string())
}

/// A quoted scalar, which may span lines (line breaks fold to spaces).
fn quoted(
    lines: &[Line],
    pos: &mut usize,
    parent_indent: usize,
    first: &str,
    no: usize,
) -> Result<Value, FrontmatterError> {
    let q = first.as_bytes()[0] as char;
    let mut raw = first[1..].to_string();
    let mut scanned = 0;
    loop {
        match find_close_from(&raw, q, scanned) {
            Ok(end) => {
                let after = strip_comment(&raw[end + 1..]);
                if !after.is_empty() {
                    return Err(err("unexpected text after a quoted scalar", no));
                }
                raw.truncate(end);
                break;
            }
            Err(resume) => scanned = resume,
        }
        if *pos >= lines.len()
            || (lines[*pos].indent <= parent_indent && !lines[*pos].text.is_empty())
        {
            return Err(err("missing closing quote", no));
        }
        let t = lines[*pos].text;
        *pos += 1;
        if t.is_empty() {
            raw.push('\n');
        } else {
            if !raw.ends_with('\n') {
                raw.push(' ');
            }
            raw.push_str(t);
        }
    }
    if q == '\'' {
        return Ok(Value::String(raw.replace("''", "'")));
    }
    unescape_double(&raw, no).map(Value::String)
}

/// The index of the closing quote in `s` (after the opening one).
fn find_close(s: &str, q: char) -> Option<usize> {
    find_close_from(s, q, 0).ok()
}

/// [`find_close`] starting at byte `from`; `Err(resume)` when there is
/// none yet: the offset to resume at once more text is appended (so a
/// scalar over many lines is scanned once, not once per line).
fn find_close_from(s: &str, q: char, from: usize) -> Result<usize, usize> {
    let b = s.as_bytes();
    let mut i = from;
    while i < b.len() {
        let c = b[i] as char;
        if q == '"' && c == '\\' {
            i += 2;
            continue;
        }
        if c == q {
            if q == '\'' && b.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return Ok(i);
        }
        i += 1;
    }
    Err(i)
}

fn unescape_double(s: &str, no: usize) -> Result<String, FrontmatterError> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('0') => out.push('\0'),
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('/') => out.push('/'),
            Some(' ') => out.push(' '),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let ch = u32::from_str_radix(&hex, 16)
                    .ok()
                    .and_then(char::from_u32)
                    .ok_or_else(|| err("bad unicode escape", no))?;
                out.push(ch);
            }
            _ => return Err(err("unknown escape sequence", no)),
        }
    }
    Ok(out)
}

/// `|` literal or `>` folded block scalar with optional chomping indicator.
fn block_scalar(
    lines: &[Line],
    pos: &mut usize,
    parent_indent: usize,
    header: &str,
    no: usize,
) -> Result<Value, FrontmatterError> {
    let folded = header.starts_with('>');
    let mut chomp = ' ';
    for c in header[1..].chars() {
        match c {
            '-' | '+' => chomp = c,
            '1'..='9' => {}
            _ => return Err(err("bad block scalar header", no)),
        }
    }
    // Collect the block's lines: everything more indented than the parent,
    // plus blank lines in between.
    let start = *pos;
    let mut end = start;
    let mut block_indent = None;
    while end < lines.len() {
        let l = &lines[end];
        if l.text.is_empty() {
            end += 1;
            continue;
        }
        if l.indent <= parent_indent {
            break;
        }
        if block_indent.is_none() {
            block_indent = Some(l.indent);
        }
        end += 1;
    }
    // Trailing blank lines are not part of the block's content lines.
    let mut content_end = end;
    while content_end > start && lines[content_end - 1].text.is_empty() {
        content_end -= 1;
    }
    *pos = end;
    let bi = block_indent.unwrap_or(parent_indent + 1);
    let raw: Vec<String> = lines[start..content_end]
        .iter()
        .map(|l| {
            if l.text.is_empty() {
                String::new()
            } else {
                format!("{}{}", " ".repeat(l.indent.saturating_sub(bi)), l.text)
            }
        })
        .collect();
    let mut text = if folded {
        let mut out = String::new();
        let mut prev_more = false;
        for (i, l) in raw.iter().enumerate() {
            let more = l.starts_with(' ');
            if i > 0 {
                if l.is_empty() || raw[i - 1].is_empty() || more || prev_more {
                    out.push('\n');
                } else {
                    out.push(' ');
                }
            }
            out.push_str(l);
            prev_more = more;
        }
        // `a\n\nb` folds to "a\nb": one newline per blank line.
        out.replace(" \n", "\n")
    } else {
        raw.join("\n")
    };
    let trailing_blank = end - content_end;
    match chomp {
        '-' => {}
        '+' => {
            if !raw.is_empty() {
                text.push('\n');
            }
            for _ in 0..trailing_blank {
                text.push('\n');
            }
        }
        _ => {
            if !raw.is_empty() {
                text.push('\n');
            }
        }
    }
    Ok(Value::String(text))
}

fn parse_seq(
    lines: &[Line],
    pos: &mut usize,
    indent: usize,
    depth: usize,
) -> Result<Vec<Value>, FrontmatterError> {
    nest(lines, *pos, depth)?;
    let mut out = Vec::new();
    loop {
        skip_blank(lines, pos);
        if *pos >= lines.len() || lines[*pos].indent != indent {
            return Ok(out);
        }
        let l = &lines[*pos];
        let rest = if l.text == "-" {
            ""
        } else if let Some(r) = l.text.strip_prefix("- ") {
            r.trim()
        } else {
            return Ok(out);
        };
        *pos += 1;
        if let Some((k, v)) =
            split_key(rest).filter(|_| !rest.starts_with('"') && !rest.starts_with('\''))
        {
            // `- key: value` starts a map item.
            let item_indent = indent + 2;
            let mut map = Map::new();
            let first = parse_value(lines, pos, item_indent, v, l.no, depth + 1)?;
            map.insert(k, first);
            let more = parse_map(lines, pos, item_indent, depth + 1)?;
            map.extend(more);
            out.push(Value::Object(map));
        } else {
            out.push(parse_value(lines, pos, indent, rest, l.no, depth + 1)?);
        }
    }
}

/// A flow collection; returns the value and the bytes consumed.
fn flow(s: &str, no: usize, depth: usize) -> Result<(Value, usize), FrontmatterError> {
    if depth > MAX_DEPTH {
        return Err(err(TOO_DEEP, no));
    }
    let b = s.as_bytes();
    let (open, close) = (b[0], if b[0] == b'[' { b']' } else { b'}' });
    let mut i = 1;
    let mut items = Vec::new();
    let mut map = Map::new();
    loop {
        while i < b.len() && (b[i] == b' ' || b[i] == b',') {
            i += 1;
        }
        if i >= b.len() {
            return Err(err(
                &format!(
                    "flow collection must end with a {}",
                    if open == b'[' { ']' } else { '}' }
                ),
                no,
            ));
        }
        if b[i] == close {
            i += 1;
            break;
        }
        let (item, used) = if b[i] == b'[' || b[i] == b'{' {
            flow(&s[i..], no, depth + 1)?
        } else if b[i] == b'"' || b[i] == b'\'' {
            let q = b[i] as char;
            let end = find_close(&s[i + 1..], q).ok_or_else(|| err("missing closing quote", no))?;
            let raw = &s[i + 1..i + 1 + end];
            let v = if q == '"' {
                unescape_double(raw, no)?
            } else {
                raw.replace("''", "'")
            };
            (Value::String(v), end + 2)
        } else {
            let mut j = i;
            while j < b.len() && b[j] != b',' && b[j] != close && !(b[j] == b':' && open == b'{') {
                j += 1;
            }
            (plain_scalar(s[i..j].trim()), j - i)
        };
        i += used;
        if open == b'{' {
            while i < b.len() && b[i] == b' ' {
                i += 1;
            }
            let key = match &item {
                Value::String(k) => k.clone(),
                other => other.to_string(),
            };
            if i < b.len() && b[i] == b':' {
                i += 1;
                while i < b.len() && b[i] == b' ' {
                    i += 1;
                }
                let (v, used) = if i < b.len() && (b[i] == b'[' || b[i] == b'{') {
                    flow(&s[i..], no, depth + 1)?
                } else {
                    let mut j = i;
                    while j < b.len() && b[j] != b',' && b[j] != close {
                        j += 1;
                    }
                    (plain_scalar(s[i..j].trim()), j - i)
                };
                i += used;
                map.insert(key, v);
            } else {
                map.insert(key, Value::Null);
            }
        } else {
            items.push(item);
        }
    }
    let v = if open == b'[' {
        Value::Array(items)
    } else {
        Value::Object(map)
    };
    Ok((v, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fm(s: &str) -> Map<String, Value> {
        parse(s).unwrap().fields
    }

    #[test]
    fn scalars_quotes_comments() {
        let m = fm("---\nname: 'quoted'\ndescription: \"has: colon # and hash\"\nx: d # trailing\nb: true\nn: 123\n---\nbody");
        assert_eq!(m["name"], "quoted");
        assert_eq!(m["description"], "has: colon # and hash");
        assert_eq!(m["x"], "d");
        assert_eq!(m["b"], true);
        assert!(m["n"].is_number());
    }

    #[test]
    fn blocks_fold_and_keep_like_pi() {
        let m = fm("---\na: >\n  folded line one\n  line two\nb: |\n  lit one\n  lit two\nc: first\n  continued plain\n---\n");
        assert_eq!(m["a"], "folded line one line two\n");
        assert_eq!(m["b"], "lit one\nlit two\n");
        assert_eq!(m["c"], "first continued plain");
    }

    #[test]
    fn deep_nesting_is_an_error_and_long_quotes_scan_once() {
        let deep = format!("---\na: {}\n---\n", "[".repeat(10_000));
        assert_eq!(parse(&deep).unwrap_err().message, TOO_DEEP);
        let indented: String = (0..500)
            .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
            .collect();
        let e = parse(&format!("---\n{indented}---\n")).unwrap_err();
        assert_eq!((e.message.as_str(), e.line), (TOO_DEEP, 103));
        assert!(parse(&format!(
            "---\na: {}1{}\n---\n",
            "[".repeat(50),
            "]".repeat(50)
        ))
        .is_ok());
        // A quoted scalar over several lines; a backslash ending a line
        // escapes the space the fold inserts.
        assert_eq!(fm("---\na: \"x\\\n  \"\n---\n")["a"], "x ");
        assert_eq!(fm("---\na: 'it''\n  s'\n---\n")["a"], "it' s");
        assert_eq!(
            fm("---\na: \"one\n  two\n  three\"\n---\n")["a"],
            "one two three"
        );
    }

    #[test]
    fn unclosed_flow_is_an_error_and_body_split() {
        assert!(parse("---\ndescription: [unclosed\n---\nx").is_err());
        assert!(parse("---\ndescription: a (b: c)\n---\nx").is_err());
        let p = parse("---\r\ndescription: d\r\n---\r\nbody\r\n").unwrap();
        assert_eq!(p.body, "body\n");
        assert!(!parse("no fm").unwrap().has_frontmatter);
        let m = fm("---\nl:\n  - a\n  - b\nm:\n  k: v\n---\n");
        assert_eq!(m["l"], serde_json::json!(["a", "b"]));
        assert_eq!(m["m"]["k"], "v");
    }
}
