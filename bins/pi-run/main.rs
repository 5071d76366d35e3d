//! `pi-run` — the agent loop. Not built yet: it documents itself and refuses to
//! run, so nothing pretends to work.

fn main() {
    pi_lib::cli::not_implemented_main(
        "pi-run",
        "Run the pi agent loop on a task: providers, tools, sessions (not implemented yet).",
    );
}
