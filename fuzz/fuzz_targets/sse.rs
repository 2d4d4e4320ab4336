//! SSE framing (`ctax_collector::sse`) and the record built from the frames.
//!
//! Input: byte 0 chooses how the rest is cut into reads; the rest is the response body.
//! Checks, beyond "no panic":
//! - fed in arbitrary reads, the parser gives exactly the frames, comments and end state it
//!   gives for the whole body in one read (line ends split anywhere, CRLF across reads);
//! - frame times never go backwards and every frame lies inside the payload buffer;
//! - the `RequestRecord` the writer thread builds from those frames serialises to a line that
//!   the ingest reader parses back (the collector never writes what ingest cannot read).
#![no_main]

use ctax_collector::collect::record::{CellMeta, IoOutcome, RawResult, build_record};
use ctax_collector::sse::{EofState, FrameSink, SseParser};
use ctax_schema::{Phase, RequestRecord};
use libfuzzer_sys::fuzz_target;

fn parse(chunks: &[&[u8]]) -> (FrameSink, EofState) {
    let mut p = SseParser::new();
    let mut sink = FrameSink::default();
    for (i, c) in chunks.iter().enumerate() {
        p.feed(c, 1_000 + i as u64, &mut sink);
    }
    let eof = p.finish(&mut sink);
    (sink, eof)
}

fn summary(s: &FrameSink) -> Vec<(Vec<u8>, ctax_collector::sse::FrameKind)> {
    s.frames
        .iter()
        .map(|f| (s.payload(f).to_vec(), f.kind))
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&k, body)) = data.split_first() else {
        return;
    };
    let (whole, whole_eof) = parse(&[body]);
    // Cut into reads of 1..=8 bytes following a small LCG seeded by byte 0.
    let mut chunks = Vec::new();
    let (mut rest, mut x) = (body, u32::from(k));
    while !rest.is_empty() {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let n = ((x >> 16) as usize % 8 + 1).min(rest.len());
        chunks.push(&rest[..n]);
        rest = &rest[n..];
    }
    let (split, split_eof) = parse(&chunks);
    assert_eq!(summary(&whole), summary(&split));
    assert_eq!(whole_eof, split_eof);
    assert_eq!(whole.comments, split.comments);
    assert_eq!(whole.done_t_ns.is_some(), split.done_t_ns.is_some());
    assert_eq!(
        whole.error_event_t_ns.is_some(),
        split.error_event_t_ns.is_some()
    );
    assert_eq!(split.bytes, body.len() as u64);
    for w in split.frames.windows(2) {
        assert!(w[0].t_ns <= w[1].t_ns);
    }
    for f in &split.frames {
        assert!(f.start <= f.end && f.end as usize <= split.data.len());
    }

    let meta = CellMeta {
        config: "plain".into(),
        launch: 0,
        phase: Phase::A,
        cell: "r1_i8_o4".into(),
        rate: 1.0,
        input_len: 8,
        output_len: 4,
    };
    let t_last = 1_000 + chunks.len() as u64;
    let raw = RawResult {
        seq: 0,
        t_intended_ns: 900,
        t_send_ns: 950,
        t_end_ns: split.done_t_ns.unwrap_or(t_last),
        inflight_at_send: 0,
        warmup: false,
        outcome: IoOutcome::Eof,
        http_status: Some(200),
        error: None,
        sink: split,
        eof: split_eof,
        head: body[..body.len().min(256)].to_vec(),
    };
    let (rec, _) = build_record(&meta, raw);
    let line = serde_json::to_vec(&rec).expect("a record serialises");
    let back = ctax_schema::jsonl::parse_line::<RequestRecord>(&line)
        .unwrap_or_else(|e| panic!("ingest cannot read what the writer wrote: {e:?}"))
        .expect("not blank");
    assert_eq!(back.events, rec.events);
    assert_eq!(back.status, rec.status);
    assert_eq!(back.error, rec.error);
    assert_eq!(back.completion_tokens, rec.completion_tokens);
});
