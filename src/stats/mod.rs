//! Pure statistics: no I/O, no knowledge of configs or files.

pub(crate) mod block_length;
mod bootstrap;
pub(crate) mod launch_noise;
pub(crate) mod linear;
pub(crate) mod percentile;
pub(crate) mod rank_test;

pub use bootstrap::{BootstrapConfig, Method, percentile_interval, quantile_replicates};
pub(crate) use bootstrap::{quantiles_replicates, stable_seed};
pub(crate) use percentile::{mean, quantile, quantile_sorted};
