//! What a script can reach and find: the callable tools (the agent's
//! active ones, then those a [`Catalog`] adds, such as MCP tools that are
//! not declared), each with its identifier, namespace and script
//! description, and the lookups behind `searchTools()` (BM25 over names
//! and descriptions), `describeTool()` and `describeNamespace()`.

use std::sync::Arc;

use serde_json::{json, Value};

use super::declare;
use super::engine::Queries;
use crate::agent::hooks::BoxFuture;
use crate::tools::Tool;

/// A group of tools, such as one MCP server's (`mcp__<server>`).
#[derive(Debug, Clone, PartialEq)]
pub struct Namespace {
    pub name: String,
    pub description: Option<String>,
    pub instructions: Option<String>,
}

/// The tools besides the agent's active ones that scripts may call, and
/// what groups them (implemented by the MCP servers).
pub trait Catalog: Send + Sync {
    /// The extra callable tools, in order.
    fn tools(&self) -> Vec<Arc<dyn Tool>>;
    /// The namespace a tool belongs to.
    fn namespace_of(&self, tool: &str) -> Option<Namespace>;
    /// Every namespace.
    fn namespaces(&self) -> Vec<Namespace>;
    /// Waits for what a script with this source may reach (the servers it
    /// names, or all of them when it lists or searches tools).
    fn ready<'a>(&'a self, code: &'a str) -> BoxFuture<'a, ()>;
}

/// One callable tool as scripts see it.
#[derive(Clone)]
pub struct Entry {
    pub id: String,
    pub tool: Arc<dyn Tool>,
    pub namespace: Option<Namespace>,
    pub description: String,
}

/// The callable tools: `active` (without `codemode` itself), then `more`,
/// each name once.
pub fn entries(
    active: &[Arc<dyn Tool>],
    more: &[Arc<dyn Tool>],
    catalog: Option<&dyn Catalog>,
) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for t in active.iter().chain(more) {
        let d = t.definition();
        if d.name == super::NAME || out.iter().any(|e| e.tool.name().into_owned() == d.name) {
            continue;
        }
        let id = declare::identifier(&d.name);
        let output = t.output_schema();
        // A declared tool's description without its `Codemode:` line.
        let line = declare::codemode_line(&id, output.as_ref());
        let own = d.description.strip_suffix(&line).unwrap_or(&d.description);
        let description = declare::script_description(
            &id,
            own,
            &t.prompt_guidelines(),
            &d.parameters,
            output.as_ref(),
        );
        out.push(Entry {
            namespace: catalog.and_then(|c| c.namespace_of(&d.name)),
            id,
            tool: Arc::clone(t),
            description,
        });
    }
    out
}

/// The words of a text, lower-cased.
pub fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// BM25 scores of `docs` for `query`, best first (ties in order); only
/// documents that match a word.
pub fn rank(query: &str, docs: &[Vec<String>]) -> Vec<(usize, f64)> {
    let q = words(query);
    let n = docs.len() as f64;
    let avg = docs.iter().map(Vec::len).sum::<usize>() as f64 / n.max(1.0);
    let (k1, b) = (1.2, 0.75);
    let mut scored: Vec<(usize, f64)> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let len = d.len() as f64;
            let score = q
                .iter()
                .map(|t| {
                    let tf = d.iter().filter(|w| *w == t).count() as f64;
                    if tf == 0.0 {
                        return 0.0;
                    }
                    let df = docs.iter().filter(|d| d.contains(t)).count() as f64;
                    let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                    idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * len / avg.max(1.0)))
                })
                .sum::<f64>();
            (i, score)
        })
        .filter(|(_, s)| *s > 0.0)
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored
}

/// A namespace name as scripts may write it: `mcp__dev-radius`,
/// `mcp__dev_radius`, `dev-radius` and `dev_radius` are one.
fn same_namespace(ns: &str, asked: &str) -> bool {
    let norm = |s: &str| s.strip_prefix("mcp__").unwrap_or(s).replace('-', "_");
    norm(ns) == norm(asked)
}

/// The lookups of one script, over its callable tools.
pub struct Lookup {
    pub entries: Vec<Entry>,
    pub namespaces: Vec<Namespace>,
    /// Names of the tools declared to the model (searches skip them).
    pub declared: Vec<String>,
}

impl Lookup {
    fn item(e: &Entry) -> Value {
        json!({"name": e.id, "description": e.description})
    }

    fn search(&self, query: &str, opts: &Value) -> Value {
        let limit = opts
            .get("limit")
            .and_then(Value::as_f64)
            .filter(|l| *l >= 1.0)
            .map(|l| l as usize)
            .unwrap_or(8);
        let ns = opts.get("namespace").and_then(Value::as_str);
        let pool: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| !self.declared.contains(&e.tool.name().into_owned()))
            .filter(|e| match ns {
                Some(n) => e
                    .namespace
                    .as_ref()
                    .is_some_and(|x| same_namespace(&x.name, n)),
                None => true,
            })
            .collect();
        let docs: Vec<Vec<String>> = pool
            .iter()
            .map(|e| {
                let mut w = words(&e.id);
                w.extend(words(&e.tool.definition().description));
                if let Some(n) = &e.namespace {
                    w.extend(words(n.description.as_deref().unwrap_or("")));
                }
                w
            })
            .collect();
        Value::Array(
            rank(query, &docs)
                .into_iter()
                .take(limit)
                .map(|(i, _)| Lookup::item(pool[i]))
                .collect(),
        )
    }

    fn namespace(&self, name: &str) -> Option<Value> {
        let ns = self
            .namespaces
            .iter()
            .find(|n| same_namespace(&n.name, name))?;
        let mut m = serde_json::Map::new();
        m.insert("name".into(), ns.name.clone().into());
        if let Some(d) = &ns.description {
            m.insert("description".into(), d.clone().into());
        }
        if let Some(i) = &ns.instructions {
            m.insert("instructions".into(), i.clone().into());
        }
        let tools: Vec<Value> = self
            .entries
            .iter()
            .filter(|e| e.namespace.as_ref().is_some_and(|n| n.name == ns.name))
            .map(|e| e.id.clone().into())
            .collect();
        m.insert("tools".into(), Value::Array(tools));
        Some(Value::Object(m))
    }
}

impl Queries for Lookup {
    fn query(&self, kind: &str, a: &str, b: &str) -> String {
        let opts: Value = serde_json::from_str(b).unwrap_or(Value::Null);
        let v = match kind {
            "search" => Some(self.search(a, &opts)),
            "tool" => self
                .entries
                .iter()
                .find(|e| e.id == a || e.tool.name().into_owned() == a)
                .map(|e| Value::String(e.description.clone())),
            "namespace" => self.namespace(a),
            // The toolkit runs no classifier or image models, and scripts
            // cannot run chat models.
            "models" => Some(Value::Array(Vec::new())),
            _ => None,
        };
        v.map(|v| v.to_string()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_match_in_every_spelling() {
        for n in [
            "mcp__dev-radius",
            "mcp__dev_radius",
            "dev-radius",
            "dev_radius",
        ] {
            assert!(same_namespace("mcp__dev_radius", n), "{n}");
        }
        assert!(!same_namespace("mcp__dev_radius", "radius"));
        let docs = vec![words("get sum of numbers"), words("echo message")];
        assert_eq!(rank("sum", &docs)[0].0, 0);
        assert!(rank("nothing", &docs).is_empty());
    }
}
