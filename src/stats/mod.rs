//! Pure statistics: no I/O, no knowledge of configs or files.

pub mod block_length;
pub mod bootstrap;
pub mod launch_noise;
pub mod percentile;

pub use bootstrap::{
    BootstrapConfig, Method, percentile_interval, quantile_replicates, quantiles_replicates,
};
pub use percentile::{mean, quantile, quantile_sorted};
