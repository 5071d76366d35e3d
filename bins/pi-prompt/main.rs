//! `pi-prompt` — the system prompt builder. Not built yet: it documents itself and refuses to
//! run, so nothing pretends to work.

fn main() {
    pi_lib::cli::not_implemented_main(
        "pi-prompt",
        "Build the sectioned system prompt and expand user input (not implemented yet).",
    );
}
