//! The entry tree (`id` / `parentId`): branch walks, children, labels and
//! the flattened view `pi-session tree` prints.

use std::collections::HashMap;

use crate::format::Entry;

use super::Session;

impl Session {
    /// Entry indices from the root down to `leaf` (inclusive). A missing
    /// parent ends the walk (the entry is treated as a root); cycles stop.
    pub fn path_to(&self, leaf: &str) -> Vec<usize> {
        let mut out = Vec::new();
        // Entry positions, so a flag per entry beats hashing them.
        let mut seen = vec![false; self.entries.len()];
        let mut cur = self.index_of(leaf);
        while let Some(i) = cur {
            if std::mem::replace(&mut seen[i], true) {
                break;
            }
            out.push(i);
            cur = self.parent_index(i);
        }
        out.reverse();
        out
    }

    /// The current branch: root → leaf.
    pub fn branch(&self) -> Vec<usize> {
        match self.leaf_id() {
            Some(l) => self.path_to(l),
            None => Vec::new(),
        }
    }

    /// Current label of each entry: the latest `label` entry per target wins;
    /// one without a label clears it.
    pub fn labels(&self) -> HashMap<String, String> {
        let mut out = HashMap::new();
        for e in &self.entries {
            if let Entry::Label(l) = e {
                match &l.label {
                    Some(text) if !text.is_empty() => {
                        out.insert(l.target_id.clone(), text.clone());
                    }
                    _ => {
                        out.remove(&l.target_id);
                    }
                }
            }
        }
        out
    }

    /// The session's display name, as pi decides it: the name of the last
    /// `session_info` entry in the file, trimmed; a blank one clears it.
    pub fn name(&self) -> Option<String> {
        self.entries.iter().rev().find_map(|e| match e {
            Entry::SessionInfo(i) => Some(
                i.name
                    .as_deref()
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_string),
            ),
            _ => None,
        })?
    }

    /// The parentId cycles of the tree (each as entry indices, starting
    /// with its first entry in file order); normally none.
    pub fn cycles(&self) -> Vec<Vec<usize>> {
        // 0 = not seen, 1 = on the walk in progress, 2 = done.
        let mut state = vec![0u8; self.entries.len()];
        let mut out = Vec::new();
        let mut walk = Vec::new();
        for start in 0..self.entries.len() {
            let mut cur = Some(start);
            while let Some(i) = cur.filter(|&i| state[i] == 0) {
                state[i] = 1;
                walk.push(i);
                cur = self.parent_index(i);
            }
            if let Some(i) = cur.filter(|&i| state[i] == 1) {
                if let Some(pos) = walk.iter().position(|&w| w == i) {
                    let mut cycle = walk[pos..].to_vec();
                    cycle.sort_unstable();
                    out.push(cycle);
                }
            }
            for &w in &walk {
                state[w] = 2;
            }
            walk.clear();
        }
        out
    }

    /// The roots, and the children of each entry index, in file order.
    pub fn children(&self) -> (Vec<usize>, Children) {
        let n = self.entries.len();
        let mut roots = Vec::new();
        let parent = |i: usize| match self.parent_index(i) {
            Some(p) if p != i => Some(p),
            _ => None,
        };
        // Count, then place: two flat arrays instead of a vector per entry.
        let mut start = vec![0u32; n + 1];
        for i in (0..n).filter(|&i| self.is_tree_node(i)) {
            match parent(i) {
                Some(p) => start[p + 1] += 1,
                None => roots.push(i),
            }
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut list = vec![0u32; start[n] as usize];
        for i in (0..n).filter(|&i| self.is_tree_node(i)) {
            if let Some(p) = parent(i) {
                list[fill[p] as usize] = i as u32;
                fill[p] += 1;
            }
        }
        (roots, Children { start, list })
    }

    /// The tree flattened in depth-first order, for printing. A linear run
    /// stays in one column; only branch points indent their children.
    pub fn tree_rows(&self) -> Vec<TreeRow> {
        let (roots, kids) = self.children();
        let mut on_branch = vec![false; self.entries.len()];
        for i in self.branch() {
            on_branch[i] = true;
        }
        let leaf = self.leaf_id().and_then(|l| self.index_of(l));
        let mut out = Vec::new();
        // (index, depth, lead printed before the node, continuation prefix)
        let mut stack: Vec<(usize, usize, String, String)> = Vec::new();
        let multi_root = roots.len() > 1;
        for (n, &r) in roots.iter().enumerate().rev() {
            let last = n + 1 == roots.len();
            if multi_root {
                let (lead, cont) = if last {
                    ("└─ ", "   ")
                } else {
                    ("├─ ", "│  ")
                };
                stack.push((r, 1, lead.to_string(), cont.to_string()));
            } else {
                stack.push((r, 0, String::new(), String::new()));
            }
        }
        let mut visited = vec![false; self.entries.len()];
        // Entries in a parentId cycle have no root above them: each cycle is
        // shown from its first entry in file order, after the real roots.
        let mut extra_roots = self
            .entries
            .iter()
            .enumerate()
            .filter(|(i, _)| self.is_tree_node(*i))
            .map(|(i, _)| i);
        loop {
            let Some((i, depth, lead, cont)) = stack.pop() else {
                match extra_roots.find(|&i| !visited[i]) {
                    Some(r) => {
                        stack.push((r, 0, String::new(), String::new()));
                        continue;
                    }
                    None => break,
                }
            };
            if std::mem::replace(&mut visited[i], true) {
                continue;
            }
            let children = kids.of(i);
            out.push(TreeRow {
                index: i,
                depth,
                prefix: lead,
                children: children.len(),
                on_branch: on_branch[i],
                is_leaf: leaf == Some(i),
            });
            if children.len() == 1 {
                stack.push((children[0] as usize, depth, cont.clone(), cont));
                continue;
            }
            for (n, &c) in children.iter().enumerate().rev() {
                let c = c as usize;
                let last = n + 1 == children.len();
                let (l, k) = if last {
                    ("└─ ", "   ")
                } else {
                    ("├─ ", "│  ")
                };
                stack.push((c, depth + 1, format!("{cont}{l}"), format!("{cont}{k}")));
            }
        }
        out
    }
}

/// The children of every entry, by entry index, in file order (entry
/// positions fit in `u32`: the session's links use them too).
#[derive(Debug, Clone, Default)]
pub struct Children {
    /// `list[start[i]..start[i + 1]]` are the children of entry `i`.
    start: Vec<u32>,
    list: Vec<u32>,
}

impl Children {
    /// The children of entry `i` (none for an index out of range).
    pub fn of(&self, i: usize) -> &[u32] {
        match (self.start.get(i), self.start.get(i + 1)) {
            (Some(&a), Some(&b)) => &self.list[a as usize..b as usize],
            _ => &[],
        }
    }
}

/// One row of the flattened tree.
#[derive(Debug, Clone)]
pub struct TreeRow {
    pub index: usize,
    /// Number of branch points above this entry.
    pub depth: usize,
    /// What to draw before the entry (`├─ `, `│  └─ `, …).
    pub prefix: String,
    /// Number of children; more than one marks a branch point.
    pub children: usize,
    pub on_branch: bool,
    pub is_leaf: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn children_in_file_order_roots_apart() {
        let mut text = String::from(
            r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#,
        );
        // a ← b, a ← c, b ← d, e (root), c ← f, x ← y (dangling parent: a root)
        for (id, parent) in [
            ("a", None),
            ("b", Some("a")),
            ("c", Some("a")),
            ("d", Some("b")),
            ("e", None),
            ("f", Some("c")),
            ("y", Some("x")),
        ] {
            let p = parent.map_or("null".to_string(), |p| format!("\"{p}\""));
            text.push_str(&format!(
                "\n{{\"type\":\"label\",\"id\":\"{id}\",\"parentId\":{p},\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"targetId\":\"a\",\"label\":\"l\"}}"
            ));
        }
        text.push('\n');
        let s = Session::parse(Path::new("t.jsonl"), text.as_bytes()).unwrap();
        let (roots, kids) = s.children();
        assert_eq!(roots, vec![0, 4, 6]);
        let all: Vec<Vec<u32>> = (0..s.entries.len() + 1)
            .map(|i| kids.of(i).to_vec())
            .collect();
        assert_eq!(
            all,
            vec![
                vec![1, 2],
                vec![3],
                vec![5],
                vec![],
                vec![],
                vec![],
                vec![],
                vec![]
            ]
        );
        let rows: Vec<(usize, usize, String)> = s
            .tree_rows()
            .into_iter()
            .map(|r| (r.index, r.depth, r.prefix))
            .collect();
        assert_eq!(rows.len(), 7);
        assert_eq!(rows[0], (0, 1, "├─ ".to_string()));
        assert_eq!(rows[1], (1, 2, "│  ├─ ".to_string()));
        assert_eq!(rows[2], (3, 2, "│  │  ".to_string()));
        assert_eq!(rows[3], (2, 2, "│  └─ ".to_string()));
    }
}
