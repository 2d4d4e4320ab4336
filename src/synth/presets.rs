//! The named specs of `ctax synth --preset`.

use super::{SynthConfig, SynthSpec};

/// Named presets of `ctax synth --preset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// All 8 configs, Phase A + B, known taxes.
    Demo,
    /// Seed scale: 8 configs × 16 cells × 2,000 requests × 256 events.
    Bench,
}

/// The spec of a named preset.
pub fn preset(preset: Preset) -> SynthSpec {
    let eight = |callback: bool| -> Vec<SynthConfig> {
        let mut v = vec![
            ("plain", 1.0, 1.0, 8.0, 0.0),
            ("noop_connector", 1.04, 1.02, 8.0, 15.0),
            ("mooncake_producer", 1.15, 1.08, 7.5, 60.0),
            ("mooncake_consumer", 1.12, 1.06, 7.5, 55.0),
            ("mooncake_both", 1.30, 1.15, 7.0, 90.0),
            ("nixl_both", 1.22, 1.10, 7.0, 70.0),
            ("lmcache_only", 1.10, 1.05, 7.5, 40.0),
            ("multi_mooncake_lmcache", 1.42, 1.22, 6.5, 130.0),
        ]
        .into_iter()
        .map(|(n, t, p, cap, cb)| SynthConfig {
            name: n.into(),
            ttft_mult: t,
            tpot_mult: p,
            capacity_rps: cap,
            step_extra_us: cb * 1.3,
            callback_us: (n != "plain" && callback).then_some(cb),
            slow_launch: None,
            launch_capacity: None,
            launch_sigma_extra: 0.0,
            machines: Vec::new(),
            stall: None,
        })
        .collect::<Vec<_>>();
        v.iter_mut().for_each(|c| {
            c.callback_us = if c.name == "plain" {
                None
            } else {
                c.callback_us
            }
        });
        v
    };
    match preset {
        Preset::Demo => SynthSpec {
            configs: eight(true),
            launches: 2,
            phase_a_rates: vec![0.5, 1.0, 2.0, 4.0, 8.0, 16.0],
            phase_b_shapes: [512, 4096, 32768]
                .iter()
                .flat_map(|&i| [64, 256, 1024].map(|o| (i, o)))
                .collect(),
            phase_b_rate: 4.0,
            requests_per_cell: 200,
            launch_sigma: 0.03,
            ..SynthSpec::default()
        },
        Preset::Bench => SynthSpec {
            configs: eight(true),
            launches: 1,
            phase_a_rates: vec![
                0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 16.0, 20.0, 24.0,
                32.0,
            ],
            phase_a_shape: (4096, 256),
            requests_per_cell: 2000,
            warmup_requests: 0,
            max_events: None,
            step_gap_ms: 50.0,
            ..SynthSpec::default()
        },
    }
}
