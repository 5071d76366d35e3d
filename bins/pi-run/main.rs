//! `pi-run` — the agent loop. Not built yet: this binary only documents
//! itself, so nothing pretends to work.

use clap::{CommandFactory, Parser};

/// Run the pi agent loop on a task (not implemented yet: see the README's
/// roadmap; use the real `pi` meanwhile).
#[derive(Parser, Debug)]
#[command(name = "pi-run", version, about, long_about = None)]
struct Cli {}

fn main() {
    let _ = Cli::parse();
    let _ = Cli::command().print_help();
    eprintln!("\npi-run: error: not implemented yet in this version of the pi toolkit");
    std::process::exit(2);
}
