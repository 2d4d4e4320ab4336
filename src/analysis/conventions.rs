//! The conventions every number follows, stated in words (printed by every report).

use super::model::Conventions;
use super::saturation::{THROUGHPUT_RATIO_MIN, TTFT_GROWTH_MAX, WAITING_P50_MAX};
use crate::stats::{BootstrapConfig, Method};

pub(crate) fn conventions(b: &BootstrapConfig) -> Conventions {
    let method = match b.method {
        Method::Iid => {
            "iid resampling of requests (sampled exactly via the order-statistic/Beta identity)"
                .to_owned()
        }
        Method::MovingBlock { block_len: None } => {
            "moving-block resampling over send order, block length per launch by Politis-White (2004, \
             corrected 2009)"
                .to_owned()
        }
        Method::MovingBlock { block_len: Some(l) } => {
            format!("moving-block resampling over send order, block length {l}")
        }
    };
    Conventions {
        percentile_estimator: "linear interpolation between order statistics (numpy.percentile default, \
            Hyndman-Fan type 7; the same as `vllm bench serve`)"
            .into(),
        bootstrap: *b,
        ci_method: format!(
            "{:.0}% percentile bootstrap, {} resamples, seed {}; {method}; a config with several launches is \
             resampled hierarchically (launches with replacement, then requests within each launch), so CIs \
             include launch-to-launch variation (per-cell CIs). Taxes compare a config with plain on the same \
             machine: on each machine both ran on, the mean of the config's per-launch log estimates minus \
             plain's, weighted over the machines by k_X k_plain / (k_X + k_plain); launches on a machine \
             without plain are left out, and a config that shared no machine with plain has no tax. Tax CIs \
             (and every verdict) carry the launch-to-launch variance instead of the request-level one: {}; \
             each launch's replicates draw their own normal deviates, the same for plain's launches in every \
             tax. ITL CIs \
             treat gaps as independent (narrower than a request-level bootstrap); no verdict uses ITL.",
            b.confidence * 100.0,
            b.resamples,
            b.seed,
            super::launch_noise::METHOD
        ),
        ttft: "time from the actual send (socket write) to the arrival of the first SSE event carrying output \
            tokens; `vllm bench serve` uses the same anchors. The intended-send (user) TTFT is stored too."
            .into(),
        tpot: "(last token event - first token event) / (completion_tokens - 1), per request, request-weighted; \
            completion_tokens from the server's usage chunk (identical to `vllm bench serve`)"
            .into(),
        itl: "gaps between consecutive token-carrying SSE events, pooled over requests (token-weighted, one gap \
            per event even if an event carries several tokens; as `vllm bench serve`)"
            .into(),
        e2e: "actual send to the last token-carrying event; the usage chunk and [DONE] are not events".into(),
        warmup: "requests sent during each cell's warm-up window are kept in the raw data, flagged, and excluded \
            from every statistic; only requests that ended ok count"
            .into(),
        token_source: "per-event token counts from the server (token_ids in each chunk), totals from the usage \
            chunk; never from counting chunks"
            .into(),
        effective_throughput: "completions (any request) whose last token arrived inside the measurement window \
            [end of warm-up, last scheduled send] shifted by the median end-to-end latency of the measured \
            requests (so the window covers when its requests complete), divided by the window length; the drain \
            tail after the last send never counts against a healthy rate, and outputs longer than the warm-up \
            do not either"
            .into(),
        saturation: format!(
            "saturated at rate r if, of the requests scheduled in the measurement window, the share that ended ok \
             × their completion pace (1 / slope of their completion times on their intended send times, capped at 1) \
             < {THROUGHPUT_RATIO_MIN} (a server that keeps up completes them at the pace they arrived, whatever the \
             arrival draw; not the Throughput column's effective/offered share, whose shifted window's edges move \
             with latency jitter), or num_requests_waiting p50 > \
             {WAITING_P50_MAX}, or TTFT p90(r)/TTFT p90(r/2) > {TTFT_GROWTH_MAX} (the next lower measured rate if \
             r/2 was not measured); every rate at or above the lowest flagged rate counts as saturated"
        ),
    }
}
