//! Extensions run for real: process extensions (any executable speaking
//! the `pi-ext/1` protocol of [`crate::format::extension`]) and pi's
//! TypeScript/JavaScript extensions (in the embedded Node host, over the
//! same protocol). [`host`] owns one process (and [`wire`] the pieces of
//! its conversation), [`runner`] composes every extension's answers as pi
//! does and is the agent's [`crate::agent::Hooks`], [`answer`] reads an
//! answer as pi reads it, [`tool`] makes registered tools agent tools,
//! [`loader`] starts them pass by pass under project trust (a failed load
//! fails the run), [`node`] ships the Node host, and [`gate`] is
//! `pi-run --gate`. The agent loop knows
//! none of this: it sees only the traits of [`crate::agent::hooks`].

pub mod answer;
mod conversation;
pub mod gate;
pub mod host;
pub mod loader;
pub mod node;
pub mod runner;
pub mod tool;
pub mod ui;
pub mod wire;
