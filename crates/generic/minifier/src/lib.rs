//! graphbug-minifier: shrinks a failing graph to a 1-minimal one that fails the same way.
//!
//! Candidates are sets of the original's nodes; everything else they read comes from
//! inputs holding the values one reference run computed ([`candidate`]). A [`Checker`]
//! judges candidates and [`BugIdentity`] keeps the search on the original bug. The driver
//! ([`minify()`]) truncates suffixes by binary search, removes outputs, runs delta debugging
//! with "replace by input" as removal, and ends with a 1-minimality pass, never querying a
//! candidate twice. No libtorch here: checkers that run graphs live in graphbug-repro.

pub mod bisect;
pub mod candidate;
pub mod checker;
pub mod command;
pub mod isolate;
pub mod localize;
pub mod minify;
mod pool;
pub mod progress;

pub use candidate::{Candidate, Cut, Form, Origin, Original};
pub use checker::{
    similar, BugIdentity, Check, CheckKind, Checker, Contains, Reliability, Reliably, Signature,
    Startup, Verdict, CLEAR_MARGIN,
};
pub use minify::{
    margin_text, minify, minify_parallel, Minified, MinifyError, MinifyOptions, NoSink,
    ResumePoint, Sink, Stats,
};
