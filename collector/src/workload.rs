//! What is sent and when: seeded arrival schedules and exact-length, cache-busting prompts.

use crate::rng::{SplitMix64, fnv1a, mix64};
use ctax_schema::Arrival;

/// Absolute intended send times of one cell, generated lazily (a cell has no fixed length: it
/// runs until its duration and min-completed rules are met).
#[derive(Debug, Clone)]
pub struct Schedule {
    t0_ns: u64,
    period_ns: f64,
    arrival: Arrival,
    rng: SplitMix64,
    /// Poisson: offset of the next arrival from t0, ns (f64 so gaps never round away).
    acc_ns: f64,
    seq: u64,
}

impl Schedule {
    /// `rate` in requests/s; the first request is due at `t0_ns` exactly.
    pub fn new(t0_ns: u64, rate: f64, arrival: Arrival, seed: u64) -> Self {
        Schedule {
            t0_ns,
            period_ns: 1e9 / rate,
            arrival,
            rng: SplitMix64::new(mix64(seed ^ 0x5EED_A441_7A15_0001)),
            acc_ns: 0.0,
            seq: 0,
        }
    }

    /// `(seq, intended time)` of the next request.
    pub fn next_due(&mut self) -> (u64, u64) {
        let seq = self.seq;
        self.seq += 1;
        let off = match self.arrival {
            // From the index, not by accumulation: no drift over millions of requests.
            Arrival::Fixed => seq as f64 * self.period_ns,
            Arrival::Poisson => {
                let off = self.acc_ns;
                self.acc_ns += self.rng.exp(self.period_ns);
                off
            }
        };
        (seq, self.t0_ns + off.round() as u64)
    }
}

/// Number of leading prompt ids that identify the request (4 for the sequence number, 4 for the
/// per-cell nonce). Prefix caches hash whole blocks from the start of the prompt, so a unique
/// first block means no block of any prompt can be reused.
pub const HEAD_IDS: usize = 8;

/// Minimum id range: 4 base-256 digits already give 2^32 distinct sequence numbers.
pub const MIN_VOCAB_SPAN: u32 = 256;

/// Generates prompts of exact length from ids in `[lo, hi)`.
#[derive(Debug, Clone)]
pub struct PromptGen {
    lo: u32,
    hi: u32,
    seed: u64,
    nonce: u64,
}

impl PromptGen {
    /// `identity` names the cell uniquely within a results root (config, launch, phase, cell);
    /// it and the seed make the per-cell nonce.
    pub fn new(lo: u32, hi: u32, seed: u64, identity: &str) -> Self {
        assert!(hi >= lo + MIN_VOCAB_SPAN, "vocab range too small");
        PromptGen {
            lo,
            hi,
            seed,
            nonce: mix64(fnv1a(identity.as_bytes()) ^ seed),
        }
    }

    fn digits(&self, mut x: u64, out: &mut Vec<u32>, n: usize) {
        let base = u64::from(self.hi - self.lo);
        for _ in 0..n {
            out.push(self.lo + (x % base) as u32);
            x /= base;
        }
    }

    /// The prompt of request `seq`: `len` ids, the first [`HEAD_IDS`] encoding `seq` and the
    /// nonce, the rest seeded-uniform.
    pub fn prompt(&self, seq: u64, len: usize) -> Vec<u32> {
        let mut v = Vec::with_capacity(len.max(HEAD_IDS));
        self.digits(seq, &mut v, 4);
        self.digits(self.nonce, &mut v, 4);
        v.truncate(len);
        let mut rng = SplitMix64::new(mix64(self.seed ^ mix64(seq ^ self.nonce)));
        while v.len() < len {
            v.push(rng.range_u32(self.lo, self.hi));
        }
        v
    }
}

/// Pre-serialised JSON body of one streaming `/v1/completions` request.
#[derive(Debug, Clone)]
pub struct BodyTemplate {
    /// `{"model":"…","prompt":[`
    head: Vec<u8>,
    /// `],"max_tokens":…}`
    tail: Vec<u8>,
}

impl BodyTemplate {
    pub fn new(model: &str, max_tokens: u32, return_token_ids: bool) -> Self {
        let model = serde_json::to_string(model).expect("a string always serialises");
        let head = format!("{{\"model\":{model},\"prompt\":[").into_bytes();
        let mut tail = format!(
            "],\"max_tokens\":{max_tokens},\"temperature\":0,\"ignore_eos\":true,\"stream\":true,\
             \"stream_options\":{{\"include_usage\":true}}"
        );
        if return_token_ids {
            tail.push_str(",\"return_token_ids\":true");
        }
        tail.push('}');
        BodyTemplate {
            head,
            tail: tail.into_bytes(),
        }
    }

    pub fn render(&self, prompt: &[u32]) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.head.len() + self.tail.len() + prompt.len() * 5);
        b.extend_from_slice(&self.head);
        let mut buf = itoa_buf();
        for (i, id) in prompt.iter().enumerate() {
            if i > 0 {
                b.push(b',');
            }
            b.extend_from_slice(fmt_u32(*id, &mut buf));
        }
        b.extend_from_slice(&self.tail);
        b
    }
}

fn itoa_buf() -> [u8; 10] {
    [0; 10]
}

fn fmt_u32(mut x: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (x % 10) as u8;
        x /= 10;
        if x == 0 {
            return &buf[i..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn fixed_schedule_is_exact_and_drift_free() {
        let mut s = Schedule::new(1_000, 3.0, Arrival::Fixed, 0);
        let v: Vec<_> = (0..4).map(|_| s.next_due()).collect();
        assert_eq!(
            v,
            vec![
                (0, 1_000),
                (1, 333_334_333),
                (2, 666_667_667),
                (3, 1_000_001_000)
            ]
        );
        let mut s = Schedule::new(0, 1000.0, Arrival::Fixed, 0);
        let last = (0..=1_000_000).map(|_| s.next_due().1).last().unwrap();
        assert_eq!(last, 1_000_000_000_000);
    }

    #[test]
    fn poisson_schedule_is_seeded_and_has_the_right_mean() {
        let make = |seed| {
            let mut s = Schedule::new(0, 50.0, Arrival::Poisson, seed);
            (0..20_001).map(|_| s.next_due().1).collect::<Vec<_>>()
        };
        let a = make(7);
        assert_eq!(a, make(7));
        assert_ne!(a, make(8));
        assert_eq!(a[0], 0);
        assert!(a.windows(2).all(|w| w[1] >= w[0]));
        // 20000 gaps of mean 20 ms: the mean is within 4 sd (sd of the mean = 20ms/sqrt(20000)).
        let mean = a[20_000] as f64 / 20_000.0;
        assert!(
            (mean - 2e7).abs() < 4.0 * 2e7 / (20_000f64).sqrt(),
            "mean {mean}"
        );
    }

    #[test]
    fn prompts_are_exact_seeded_in_range_and_unique_at_the_head() {
        let g = PromptGen::new(10, 4000, 3, "plain/l0/A/r4_i512_o64");
        let p = g.prompt(5, 512);
        assert_eq!(p.len(), 512);
        assert!(p.iter().all(|&x| (10..4000).contains(&x)));
        assert_eq!(p, g.prompt(5, 512));
        assert_eq!(g.prompt(5, 3), p[..3]);
        let heads: HashSet<Vec<u32>> = (0..100_000).map(|s| g.prompt(s, HEAD_IDS)).collect();
        assert_eq!(heads.len(), 100_000);
        let other = PromptGen::new(10, 4000, 3, "plain/l0/A/r8_i512_o64");
        assert_ne!(other.prompt(5, 16)[..HEAD_IDS], p[..HEAD_IDS]);
        let reseeded = PromptGen::new(10, 4000, 4, "plain/l0/A/r4_i512_o64");
        assert_ne!(reseeded.prompt(5, 512), p);
    }

    #[test]
    fn body_is_valid_json_with_the_contract_fields() {
        let t = BodyTemplate::new("m\"x", 16, true);
        let b = t.render(&[0, 7, 4_294_967_295]);
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"model":"m\"x","prompt":[0,7,4_294_967_295u32],"max_tokens":16,
                "temperature":0,"ignore_eos":true,"stream":true,
                "stream_options":{"include_usage":true},"return_token_ids":true})
        );
        let b = BodyTemplate::new("m", 1, false).render(&[]);
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert!(v.get("return_token_ids").is_none());
    }
}
