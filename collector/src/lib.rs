//! ctax-collector: the mechanism half of connector-tax.
//!
//! - [`collect`]: `ctax-collect`, open-loop load against one OpenAI-compatible server with
//!   per-event SSE timing and /metrics sampling, writing the raw JSONL of `ctax-schema`.
//! - [`sim`]: `ctax-sim`, a simulated vLLM engine (continuous batching, chunked prefill,
//!   injectable connector cost) behind an OpenAI-compatible HTTP server, for tests and demos.
//!
//! Building blocks: [`sse`] (pure SSE framing), [`prom`] (strict Prometheus text parser),
//! [`workload`] (schedules and prompts), [`clock`] (absolute-deadline waits, CPU time).
pub use ctax_schema as schema;

pub mod clock;
pub mod collect;
pub mod prom;
pub mod rng;
pub mod rtq;
pub mod sim;
pub mod sse;
pub mod stats;
pub mod workload;
