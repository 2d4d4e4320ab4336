//! Turning what the I/O runtime captured (SSE frames as raw bytes + arrival stamps) into a
//! [`RequestRecord`]. Pure: runs on the writer thread, never on the latency-measuring threads.

use crate::sse::{EofState, FrameKind, FrameSink};
use ctax_schema::{Event, Phase, RequestRecord, Status};
use serde::Deserialize;
use serde::de::IgnoredAny;
use std::borrow::Cow;

/// Identity shared by every record of one cell.
#[derive(Debug, Clone)]
pub struct CellMeta {
    pub config: String,
    pub launch: u32,
    pub phase: Phase,
    pub cell: String,
    pub rate: f64,
    pub input_len: u32,
    pub output_len: u32,
}

impl CellMeta {
    pub fn request_id(&self, seq: u64) -> String {
        ctax_schema::request_id(&self.config, self.launch, self.phase, &self.cell, seq)
    }
}

/// How the I/O task ended, before any JSON was looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoOutcome {
    /// The body ended (cleanly, or after `[DONE]`); the frames decide the status.
    Eof,
    /// `send()` failed: refused, reset or closed before any response byte.
    ConnectError,
    /// Non-2xx status.
    HttpError,
    /// `request_timeout_s` passed.
    Timeout,
    /// Reading the body failed (reset, broken chunked encoding…).
    StreamIoError,
    /// The cell's drain deadline or an interrupt cancelled it.
    Cancelled,
}

/// Everything the I/O task hands to the writer for one sent request.
#[derive(Debug)]
pub struct RawResult {
    pub seq: u64,
    pub t_intended_ns: u64,
    pub t_send_ns: u64,
    pub t_end_ns: u64,
    pub inflight_at_send: u32,
    pub warmup: bool,
    pub outcome: IoOutcome,
    pub http_status: Option<u16>,
    pub error: Option<String>,
    pub sink: FrameSink,
    pub eof: EofState,
    /// First bytes of the body (for error messages when nothing parsed).
    pub head: Vec<u8>,
}

/// Facts about a record the writer aggregates per cell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordNotes {
    /// Tokens per event were estimated (1 per non-empty choice): no `token_ids`, no usage deltas.
    pub estimated_tokens: bool,
}

/// Counts the elements of a JSON array without materialising them.
struct SeqLen(u32);

impl<'de> Deserialize<'de> for SeqLen {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = SeqLen;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<SeqLen, A::Error> {
                let mut n = 0u32;
                while a.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(SeqLen(n))
            }
        }
        d.deserialize_seq(V)
    }
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<IgnoredAny>,
    #[serde(default, borrow)]
    object: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    token_ids: Option<SeqLen>,
}

#[derive(Deserialize, Clone, Copy)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u32>,
    #[serde(default)]
    completion_tokens: Option<u32>,
}

pub fn excerpt(b: &[u8], max: usize) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(max)]);
    let mut s = s.replace('\n', "\\n");
    if b.len() > max {
        s.push('…');
    }
    s
}

/// Message of an error payload: `error.message`, else `message`, else the payload itself.
fn error_message(payload: &[u8]) -> String {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(payload) {
        let m = v
            .get("error")
            .and_then(|e| e.get("message").or(Some(e)))
            .or_else(|| v.get("message"));
        if let Some(m) = m {
            return match m {
                serde_json::Value::String(s) => s.chars().take(500).collect(),
                other => excerpt(other.to_string().as_bytes(), 500),
            };
        }
    }
    excerpt(payload, 500)
}

/// A dropped request (never sent: the in-flight cap was reached at its intended time).
pub fn dropped_record(
    meta: &CellMeta,
    seq: u64,
    t_intended_ns: u64,
    inflight: u32,
    warmup: bool,
) -> RequestRecord {
    RequestRecord {
        request_id: meta.request_id(seq),
        config: meta.config.clone(),
        launch: meta.launch,
        phase: meta.phase,
        cell: meta.cell.clone(),
        rate: meta.rate,
        input_len: meta.input_len,
        output_len: meta.output_len,
        seq,
        t_intended_ns,
        t_send_ns: None,
        t_first_token_ns: None,
        t_last_token_ns: None,
        t_end_ns: None,
        events: Vec::new(),
        prompt_tokens: None,
        completion_tokens: None,
        inflight_at_send: inflight,
        warmup,
        status: Status::Dropped,
        http_status: None,
        error: Some(format!("in-flight cap reached ({inflight} in flight)")),
    }
}

/// Builds the record of a sent request.
pub fn build_record(meta: &CellMeta, raw: RawResult) -> (RequestRecord, RecordNotes) {
    let mut events: Vec<Event> = Vec::with_capacity(raw.sink.frames.len());
    let mut usage: Option<Usage> = None;
    let mut prev_usage_completion: Option<u32> = None;
    let mut stream_error: Option<String> = None;
    let mut malformed: Option<String> = None;
    let mut estimated = false;
    let mut done = false;
    for f in &raw.sink.frames {
        let payload = raw.sink.payload(f);
        match f.kind {
            FrameKind::Done => {
                done = true;
                continue;
            }
            FrameKind::ErrorEvent => {
                stream_error
                    .get_or_insert_with(|| format!("error event: {}", error_message(payload)));
                continue;
            }
            FrameKind::Data => {}
        }
        let chunk: Chunk = match serde_json::from_slice(payload) {
            Ok(c) => c,
            Err(e) => {
                malformed.get_or_insert_with(|| {
                    format!("malformed event JSON ({e}): {}", excerpt(payload, 200))
                });
                continue;
            }
        };
        if chunk.error.is_some() || chunk.object.as_deref() == Some("error") {
            stream_error.get_or_insert_with(|| format!("error event: {}", error_message(payload)));
            continue;
        }
        let choices = chunk.choices.unwrap_or_default();
        if !choices.is_empty() {
            let with_ids = choices.iter().filter(|c| c.token_ids.is_some()).count();
            let tokens = if with_ids > 0 {
                choices
                    .iter()
                    .map(|c| c.token_ids.as_ref().map_or(0, |s| s.0))
                    .sum()
            } else if let Some(now) = chunk.usage.and_then(|u| u.completion_tokens) {
                // Continuous usage stats: per-event tokens are the usage delta.
                let d = now.saturating_sub(prev_usage_completion.unwrap_or(0));
                prev_usage_completion = Some(now);
                d
            } else {
                let n = choices
                    .iter()
                    .filter(|c| c.text.as_deref().is_some_and(|t| !t.is_empty()))
                    .count() as u32;
                if n > 0 {
                    estimated = true;
                }
                n
            };
            if tokens > 0 {
                events.push(Event(f.t_ns, tokens));
            }
        }
        if let Some(u) = chunk.usage {
            usage = Some(u);
        }
    }

    let mut error = raw.error.clone();
    let status = match raw.outcome {
        IoOutcome::Cancelled => Status::Cancelled,
        IoOutcome::Timeout => Status::Timeout,
        IoOutcome::ConnectError => Status::ConnectError,
        IoOutcome::HttpError => Status::HttpError,
        IoOutcome::StreamIoError => Status::StreamError,
        IoOutcome::Eof => {
            if let Some(e) = stream_error.take() {
                error = Some(e);
                Status::StreamError
            } else if !done {
                let mut m = format!(
                    "stream ended without [DONE] after {} events",
                    raw.sink.frames.len()
                );
                if raw.eof.partial_line_bytes > 0 {
                    m.push_str(&format!(
                        ", {} bytes of an unterminated line",
                        raw.eof.partial_line_bytes
                    ));
                }
                if raw.eof.undispatched_frame {
                    m.push_str(", a frame without its blank line");
                }
                if raw.sink.frames.is_empty() {
                    m.push_str(&format!("; body starts: {}", excerpt(&raw.head, 200)));
                }
                error = Some(m);
                Status::StreamError
            } else if let Some(m) = malformed.take() {
                error = Some(m);
                Status::StreamError
            } else if usage.and_then(|u| u.completion_tokens).is_none() {
                error = Some("no usage chunk with completion_tokens before [DONE]".into());
                Status::StreamError
            } else {
                Status::Ok
            }
        }
    };
    // Whatever ended the stream, keep the first error the stream itself carried.
    if status != Status::Ok && error.is_none() {
        error = stream_error.or(malformed);
    }
    let completion_tokens = usage.and_then(|u| u.completion_tokens);
    if status == Status::Ok {
        let sum: u32 = events.iter().map(|e| e.1).sum();
        if estimated {
            error = Some(format!(
                "note: the server sent no token_ids; 1 token per non-empty choice assumed \
                 (events sum {sum}, usage says {})",
                completion_tokens.unwrap_or(0)
            ));
        } else if Some(sum) != completion_tokens {
            error = Some(format!(
                "note: event tokens sum to {sum} but usage says {}",
                completion_tokens.unwrap_or(0)
            ));
        }
    }
    let rec = RequestRecord {
        request_id: meta.request_id(raw.seq),
        config: meta.config.clone(),
        launch: meta.launch,
        phase: meta.phase,
        cell: meta.cell.clone(),
        rate: meta.rate,
        input_len: meta.input_len,
        output_len: meta.output_len,
        seq: raw.seq,
        t_intended_ns: raw.t_intended_ns,
        t_send_ns: Some(raw.t_send_ns),
        t_first_token_ns: events.first().map(|e| e.0),
        t_last_token_ns: events.last().map(|e| e.0),
        t_end_ns: Some(raw.t_end_ns),
        events,
        prompt_tokens: usage.and_then(|u| u.prompt_tokens),
        completion_tokens,
        inflight_at_send: raw.inflight_at_send,
        warmup: raw.warmup,
        status,
        http_status: raw.http_status,
        error,
    };
    (
        rec,
        RecordNotes {
            estimated_tokens: estimated,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::SseParser;

    fn meta() -> CellMeta {
        CellMeta {
            config: "plain".into(),
            launch: 1,
            phase: Phase::A,
            cell: "r2_i6_o4".into(),
            rate: 2.0,
            input_len: 6,
            output_len: 4,
        }
    }

    fn raw_from(chunks: &[&[u8]], outcome: IoOutcome) -> RawResult {
        let mut p = SseParser::new();
        let mut sink = FrameSink::default();
        for (i, c) in chunks.iter().enumerate() {
            p.feed(c, 1_000 + i as u64 * 10, &mut sink);
        }
        let eof = p.finish(&mut sink);
        RawResult {
            seq: 3,
            t_intended_ns: 900,
            t_send_ns: 950,
            t_end_ns: sink.done_t_ns.unwrap_or(5_000),
            inflight_at_send: 2,
            warmup: false,
            outcome,
            http_status: Some(200),
            error: None,
            sink,
            eof,
            head: chunks.first().map(|c| c.to_vec()).unwrap_or_default(),
        }
    }

    #[test]
    fn real_vllm_stream_with_token_ids() {
        let text = include_bytes!("../../tests/data/vllm032_cpu_stream.txt");
        let (r, notes) = build_record(&meta(), raw_from(&[text], IoOutcome::Eof));
        assert_eq!(r.status, Status::Ok, "{:?}", r.error);
        assert_eq!(r.error, None);
        assert_eq!(r.request_id, "plain/l1/A/r2_i6_o4/3");
        assert_eq!(r.prompt_tokens, Some(6));
        assert_eq!(r.completion_tokens, Some(4));
        assert_eq!(r.events.iter().map(|e| e.1).sum::<u32>(), 4);
        assert_eq!(r.events.len(), 4);
        assert!(!notes.estimated_tokens);
    }

    #[test]
    fn multi_token_chunks_count_tokens_not_chunks() {
        let s = b"data: {\"choices\":[{\"index\":0,\"text\":\"ab\",\"token_ids\":[1,2]}]}\n\n\
                  data: {\"choices\":[{\"index\":0,\"text\":\"\",\"token_ids\":[3]}]}\n\n\
                  data: {\"choices\":[{\"index\":0,\"text\":\"\",\"token_ids\":[],\"finish_reason\":\"length\"}]}\n\n\
                  data: {\"choices\":[],\"usage\":{\"prompt_tokens\":6,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n";
        let (r, _) = build_record(&meta(), raw_from(&[&s[..40], &s[40..]], IoOutcome::Eof));
        assert_eq!(r.status, Status::Ok);
        assert_eq!(r.events.iter().map(|e| e.1).collect::<Vec<_>>(), vec![2, 1]);
        assert_eq!(r.t_first_token_ns, Some(1_010));
        assert_eq!(r.t_last_token_ns, Some(1_010));
    }

    #[test]
    fn continuous_usage_deltas_then_estimate_fallback() {
        let s = b"data: {\"choices\":[{\"text\":\"a\"}],\"usage\":{\"completion_tokens\":2}}\n\n\
                  data: {\"choices\":[{\"text\":\"b\"}],\"usage\":{\"completion_tokens\":3}}\n\n\
                  data: {\"choices\":[],\"usage\":{\"prompt_tokens\":6,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n";
        let (r, notes) = build_record(&meta(), raw_from(&[s], IoOutcome::Eof));
        assert_eq!(r.events.iter().map(|e| e.1).collect::<Vec<_>>(), vec![2, 1]);
        assert!(!notes.estimated_tokens);
        let s = b"data: {\"choices\":[{\"text\":\"a\",\"token_ids\":null}]}\n\n\
                  data: {\"choices\":[{\"text\":\"\"}]}\n\n\
                  data: {\"choices\":[],\"usage\":{\"prompt_tokens\":6,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n";
        let (r, notes) = build_record(&meta(), raw_from(&[s], IoOutcome::Eof));
        assert_eq!(r.status, Status::Ok);
        assert!(notes.estimated_tokens);
        assert_eq!(r.events.len(), 1);
        assert!(r.error.as_deref().unwrap().starts_with("note:"));
    }

    #[test]
    fn error_payloads_and_events_become_stream_errors() {
        for s in [
            &b"data: {\"choices\":[{\"text\":\"a\",\"token_ids\":[1]}]}\n\ndata: {\"error\":{\"message\":\"boom\",\"code\":500}}\n\ndata: [DONE]\n\n"[..],
            &b"data: {\"choices\":[{\"text\":\"a\",\"token_ids\":[1]}]}\n\nevent: error\ndata: {\"message\":\"boom\"}\n\n"[..],
            &b"data: {\"object\":\"error\",\"message\":\"boom\"}\n\n"[..],
        ] {
            let (r, _) = build_record(&meta(), raw_from(&[s], IoOutcome::Eof));
            assert_eq!(r.status, Status::StreamError);
            assert!(r.error.as_deref().unwrap().contains("boom"), "{:?}", r.error);
        }
    }

    #[test]
    fn missing_done_usage_and_malformed_json() {
        let (r, _) = build_record(
            &meta(),
            raw_from(
                &[b"data: {\"choices\":[{\"text\":\"a\",\"token_ids\":[1]}]}\n\n"],
                IoOutcome::Eof,
            ),
        );
        assert_eq!(r.status, Status::StreamError);
        assert!(r.error.unwrap().contains("without [DONE]"));
        assert_eq!(r.events.len(), 1); // what arrived is kept
        let (r, _) = build_record(
            &meta(),
            raw_from(
                &[b"data: {\"choices\":[{\"text\":\"a\",\"token_ids\":[1]}]}\n\ndata: [DONE]\n\n"],
                IoOutcome::Eof,
            ),
        );
        assert_eq!(r.status, Status::StreamError);
        assert!(r.error.unwrap().contains("usage"));
        let (r, _) = build_record(
            &meta(),
            raw_from(
                &[b"data: {\"choices\":[{\"te\n\ndata: [DONE]\n\n"],
                IoOutcome::Eof,
            ),
        );
        assert_eq!(r.status, Status::StreamError);
        assert!(r.error.unwrap().contains("malformed"));
        let (r, _) = build_record(
            &meta(),
            raw_from(&[b"{\"id\":\"x\",\"choices\":[]}"], IoOutcome::Eof),
        );
        assert!(r.error.unwrap().contains("body starts: {\"id\""));
    }

    #[test]
    fn io_outcomes_map_to_statuses_and_keep_partial_events() {
        let s = b"data: {\"choices\":[{\"text\":\"a\",\"token_ids\":[1]}]}\n\n";
        for (o, st) in [
            (IoOutcome::Cancelled, Status::Cancelled),
            (IoOutcome::Timeout, Status::Timeout),
            (IoOutcome::StreamIoError, Status::StreamError),
        ] {
            let (r, _) = build_record(&meta(), raw_from(&[s], o));
            assert_eq!(r.status, st);
            assert_eq!(r.events.len(), 1);
        }
        let mut raw = raw_from(&[], IoOutcome::ConnectError);
        raw.http_status = None;
        raw.error = Some("connection refused".into());
        let (r, _) = build_record(&meta(), raw);
        assert_eq!(r.status, Status::ConnectError);
        assert_eq!(r.error.as_deref(), Some("connection refused"));
    }

    #[test]
    fn dropped_records_have_no_send_time() {
        let r = dropped_record(&meta(), 9, 123, 256, true);
        assert_eq!(r.status, Status::Dropped);
        assert_eq!(r.t_send_ns, None);
        assert_eq!(r.t_intended_ns, 123);
        assert!(r.warmup);
    }
}
