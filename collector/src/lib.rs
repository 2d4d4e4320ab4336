//! ctax-collect library: pacing, SSE timing, /metrics sampling, simulated engine.
pub use ctax_schema as schema;
