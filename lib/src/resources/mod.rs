//! (being written) Resource discovery.
