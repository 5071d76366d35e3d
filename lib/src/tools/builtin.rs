//! The registry of built-in tools, in pi's order, and the default set.

use super::bash::BashTool;
use super::edit::EditTool;
use super::find::FindTool;
use super::grep::GrepTool;
use super::ls::LsTool;
use super::read::ReadTool;
use super::write::WriteTool;
use super::Tool;

/// The tools active when nothing selects others (pi 1.6.0), in order.
pub const DEFAULT_TOOLS: [&str; 4] = ["read", "bash", "edit", "write"];

/// Every built-in tool name, in pi's registry order.
pub const BUILTIN_TOOLS: [&str; 7] = ["read", "bash", "edit", "write", "grep", "find", "ls"];

/// The built-in tool called `name`, if there is one.
pub fn builtin(name: &str) -> Option<Box<dyn Tool>> {
    Some(match name {
        "read" => Box::new(ReadTool),
        "bash" => Box::new(BashTool),
        "edit" => Box::new(EditTool),
        "write" => Box::new(WriteTool),
        "grep" => Box::new(GrepTool),
        "find" => Box::new(FindTool),
        "ls" => Box::new(LsTool),
        _ => return None,
    })
}

/// All seven built-in tools in pi's registry order.
pub fn all_builtin() -> Vec<Box<dyn Tool>> {
    BUILTIN_TOOLS.iter().filter_map(|n| builtin(n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_order_and_names() {
        let names: Vec<String> = all_builtin().iter().map(|t| t.definition().name).collect();
        assert_eq!(names, BUILTIN_TOOLS);
        // The cheap name is the definition's.
        let cheap: Vec<String> = all_builtin()
            .iter()
            .map(|t| t.name().into_owned())
            .collect();
        assert_eq!(cheap, BUILTIN_TOOLS);
        assert!(builtin("nope").is_none());
        for d in DEFAULT_TOOLS {
            assert!(builtin(d).is_some());
        }
    }
}
