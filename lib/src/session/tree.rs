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

    /// Children of each entry index, in file order; roots under `None`.
    pub fn children(&self) -> (Vec<usize>, Vec<Vec<usize>>) {
        let mut roots = Vec::new();
        let mut kids = vec![Vec::new(); self.entries.len()];
        for i in 0..self.entries.len() {
            if !self.is_tree_node(i) {
                continue;
            }
            match self.parent_index(i) {
                Some(p) if p != i => kids[p].push(i),
                _ => roots.push(i),
            }
        }
        (roots, kids)
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
            let children = &kids[i];
            out.push(TreeRow {
                index: i,
                depth,
                prefix: lead,
                children: children.len(),
                on_branch: on_branch[i],
                is_leaf: leaf == Some(i),
            });
            if children.len() == 1 {
                stack.push((children[0], depth, cont.clone(), cont));
                continue;
            }
            for (n, &c) in children.iter().enumerate().rev() {
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
