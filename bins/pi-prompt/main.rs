//! `pi-prompt` — the system prompt builder. Not built yet: this binary documents itself and
//! refuses to run, so nothing pretends to work. Its commands arrive with
//! their issues; the shared library already holds the formats it will use.

use clap::{CommandFactory, Parser};
use pi_lib::cli::{generate, Generate, EXIT_OK, EXIT_USAGE};

/// Build the sectioned system prompt and expand user input (not implemented yet).
///
/// This version of the pi toolkit ships `pi-session` only; use the real
/// `pi` for this step meanwhile.
#[derive(Parser, Debug)]
#[command(
    name = "pi-prompt",
    version,
    after_help = "Exit status:\n  2    always, until this binary is implemented"
)]
struct Cli {
    /// Render a man page or a completion script on stdout.
    #[arg(long, value_enum, hide = true, value_name = "WHAT")]
    generate: Option<Generate>,
}

fn main() {
    let cli = Cli::parse();
    if let Some(what) = cli.generate {
        let code = match generate(Cli::command(), what, &mut std::io::stdout().lock()) {
            Ok(()) => EXIT_OK,
            Err(_) => EXIT_USAGE,
        };
        std::process::exit(code);
    }
    eprintln!(
        "pi-prompt: error: not implemented yet in this version of the pi toolkit (see --help)"
    );
    std::process::exit(EXIT_USAGE);
}
