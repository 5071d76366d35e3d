//! `pi-resources` — resource discovery and project trust. Not built yet: it documents itself and refuses to
//! run, so nothing pretends to work.

fn main() {
    pi_lib::cli::not_implemented_main(
        "pi-resources",
        "Discover resources and decide project trust (not implemented yet).",
    );
}
