//! `ctax run`: the seed's stages with barriers.
//!
//! | stage | what | module |
//! |---|---|---|
//! | 0 | pre-flight (verify scripts) + step-timing plugin install | [`stages`] |
//! | 1 | Phase A over all non-SKIP configs, seeded random order | [`stages`], [`launch`] |
//! | 2 | reference rates (the analysis engine's code) | [`stages::reference_rates`] |
//! | 3 | Phase B (+ B' for priority configs when ref_load ≠ ref_safe) | [`stages`] |
//! | 4 | plugin removal, analysis, report | [`stages`] |

pub mod archive;
pub mod stages;

use std::process::ExitCode;

/// Arguments of `ctax run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Profile name (launch/profiles/<name>.toml) or path to a TOML file.
    #[arg(long, default_value = "seed")]
    pub profile: String,
    /// Results root to write into (resumable).
    #[arg(long)]
    pub out: std::path::PathBuf,
}

pub fn run(_args: RunArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("ctax run: not implemented yet")
}
