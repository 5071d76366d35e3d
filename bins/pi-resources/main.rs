//! `pi-resources` — resource discovery and project trust. Not built yet: this binary only documents
//! itself, so nothing pretends to work.

use clap::{CommandFactory, Parser};

/// Discover resources and decide project trust (not implemented yet: see the README's
/// roadmap; use the real `pi` meanwhile).
#[derive(Parser, Debug)]
#[command(name = "pi-resources", version, about, long_about = None)]
struct Cli {}

fn main() {
    let _ = Cli::parse();
    let _ = Cli::command().print_help();
    eprintln!("\npi-resources: error: not implemented yet in this version of the pi toolkit");
    std::process::exit(2);
}
