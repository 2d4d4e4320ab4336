//! Server-sent-events framing as a pure state machine: bytes in, frames out.
//!
//! Follows the WHATWG event-stream grammar: lines end in CRLF, LF or CR (a CRLF split across two
//! reads is one line end); `:` starts a comment; `field: value` with one optional space after the
//! colon; several `data:` lines join with `\n`; a blank line dispatches the event, and an event
//! with no data is not dispatched. There is **no line-length cap**: a line may span any number of
//! reads and be any size.
//!
//! Time is a parameter: [`SseParser::feed`] takes the arrival time of the bytes it is given, and
//! every frame is stamped with the arrival time of the read that completed it (the read holding
//! its terminating blank line). No clock is read here, so the parser is testable byte by byte,
//! and no JSON is parsed here: payload bytes are appended to one buffer per stream and parsed
//! later, off the I/O thread.

use memchr::memchr2;

/// What a dispatched frame is, as far as framing can tell (JSON is looked at later).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// An ordinary `message` event (OpenAI chunks are these).
    Data,
    /// `data: [DONE]`, the OpenAI end-of-stream sentinel.
    Done,
    /// An event whose `event:` field was `error`.
    ErrorEvent,
}

/// One dispatched event: payload is `sink.data[start..end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    pub t_ns: u64,
    pub start: u32,
    pub end: u32,
    pub kind: FrameKind,
}

/// Where frames go: one contiguous payload buffer plus frame descriptors (few allocations per
/// stream, whatever its length).
#[derive(Debug, Default, Clone)]
pub struct FrameSink {
    pub data: Vec<u8>,
    pub frames: Vec<Frame>,
    /// Arrival of the first `[DONE]`.
    pub done_t_ns: Option<u64>,
    /// Arrival of the first `event: error` frame.
    pub error_event_t_ns: Option<u64>,
    /// Comment lines seen (`: ping` keep-alives and the like).
    pub comments: u64,
    /// Bytes fed in total.
    pub bytes: u64,
}

impl FrameSink {
    pub fn payload(&self, f: &Frame) -> &[u8] {
        &self.data[f.start as usize..f.end as usize]
    }
}

/// What was left unfinished when the stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EofState {
    /// Bytes of a line that never got its line end (discarded, per the SSE grammar).
    pub partial_line_bytes: usize,
    /// A frame had data lines but never got its blank line (discarded, per the SSE grammar).
    pub undispatched_frame: bool,
}

impl EofState {
    pub fn clean(&self) -> bool {
        self.partial_line_bytes == 0 && !self.undispatched_frame
    }
}

#[derive(Debug, Default, Clone)]
pub struct SseParser {
    /// A line that spans reads (only used when a line is split).
    line: Vec<u8>,
    /// The previous read ended in CR: a leading LF of the next read belongs to that line end.
    pending_cr: bool,
    /// No line processed yet (a UTF-8 BOM may start the stream).
    at_start: bool,
    /// Current (undispatched) frame state.
    has_data: bool,
    frame_start: usize,
    event_error: bool,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl SseParser {
    pub fn new() -> Self {
        SseParser {
            at_start: true,
            ..Default::default()
        }
    }

    /// Feeds bytes that arrived at `t_ns`.
    pub fn feed(&mut self, mut buf: &[u8], t_ns: u64, sink: &mut FrameSink) {
        sink.bytes += buf.len() as u64;
        while !buf.is_empty() {
            if self.pending_cr {
                self.pending_cr = false;
                if buf[0] == b'\n' {
                    buf = &buf[1..];
                    continue;
                }
            }
            match memchr2(b'\n', b'\r', buf) {
                Some(i) => {
                    if self.line.is_empty() {
                        self.process_line(&buf[..i], t_ns, sink);
                    } else {
                        self.line.extend_from_slice(&buf[..i]);
                        let line = std::mem::take(&mut self.line);
                        self.process_line(&line, t_ns, sink);
                        self.line = line;
                        self.line.clear();
                    }
                    if buf[i] == b'\r' {
                        self.pending_cr = true;
                    }
                    buf = &buf[i + 1..];
                }
                None => {
                    self.line.extend_from_slice(buf);
                    break;
                }
            }
        }
    }

    /// The stream ended. Unterminated lines and frames are discarded (as the SSE grammar
    /// says) and reported.
    pub fn finish(&mut self, sink: &mut FrameSink) -> EofState {
        let st = EofState {
            partial_line_bytes: self.line.len(),
            undispatched_frame: self.has_data,
        };
        if self.has_data {
            sink.data.truncate(self.frame_start);
        }
        self.line.clear();
        self.has_data = false;
        self.event_error = false;
        st
    }

    fn process_line(&mut self, mut line: &[u8], t_ns: u64, sink: &mut FrameSink) {
        if self.at_start {
            self.at_start = false;
            if let Some(rest) = line.strip_prefix(BOM) {
                line = rest;
            }
        }
        if line.is_empty() {
            self.dispatch(t_ns, sink);
            return;
        }
        if line[0] == b':' {
            sink.comments += 1;
            return;
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    sink.data.push(b'\n');
                } else {
                    self.has_data = true;
                    self.frame_start = sink.data.len();
                }
                sink.data.extend_from_slice(value);
            }
            b"event" => self.event_error = value == b"error",
            // `id`, `retry` and unknown fields do not matter here.
            _ => {}
        }
    }

    fn dispatch(&mut self, t_ns: u64, sink: &mut FrameSink) {
        if !self.has_data {
            self.event_error = false;
            return;
        }
        let start = self.frame_start;
        let end = sink.data.len();
        let payload = &sink.data[start..end];
        let kind = if self.event_error {
            FrameKind::ErrorEvent
        } else if payload == b"[DONE]" {
            FrameKind::Done
        } else {
            FrameKind::Data
        };
        match kind {
            FrameKind::Done if sink.done_t_ns.is_none() => sink.done_t_ns = Some(t_ns),
            FrameKind::ErrorEvent if sink.error_event_t_ns.is_none() => {
                sink.error_event_t_ns = Some(t_ns)
            }
            _ => {}
        }
        sink.frames.push(Frame {
            t_ns,
            start: start as u32,
            end: end as u32,
            kind,
        });
        self.has_data = false;
        self.event_error = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chunks: &[&[u8]]) -> (FrameSink, EofState) {
        let mut p = SseParser::new();
        let mut s = FrameSink::default();
        for (i, c) in chunks.iter().enumerate() {
            p.feed(c, 100 + i as u64, &mut s);
        }
        let eof = p.finish(&mut s);
        (s, eof)
    }

    fn payloads(s: &FrameSink) -> Vec<(u64, String, FrameKind)> {
        s.frames
            .iter()
            .map(|f| {
                (
                    f.t_ns,
                    String::from_utf8(s.payload(f).to_vec()).unwrap(),
                    f.kind,
                )
            })
            .collect()
    }

    const VLLM: &[u8] =
        b"data: {\"a\":1}\n\ndata: {\"choices\":[],\"usage\":{}}\n\ndata: [DONE]\n\n";

    #[test]
    fn lf_stream_in_one_read() {
        let (s, eof) = run(&[VLLM]);
        assert!(eof.clean());
        assert_eq!(
            payloads(&s),
            vec![
                (100, "{\"a\":1}".into(), FrameKind::Data),
                (100, "{\"choices\":[],\"usage\":{}}".into(), FrameKind::Data),
                (100, "[DONE]".into(), FrameKind::Done),
            ]
        );
        assert_eq!(s.done_t_ns, Some(100));
    }

    #[test]
    fn every_split_point_gives_the_same_frames() {
        let (whole, _) = run(&[VLLM]);
        let want: Vec<_> = payloads(&whole)
            .into_iter()
            .map(|(_, p, k)| (p, k))
            .collect();
        for cut in 0..=VLLM.len() {
            let (s, eof) = run(&[&VLLM[..cut], &VLLM[cut..]]);
            assert!(eof.clean(), "cut {cut}");
            let got: Vec<_> = payloads(&s).into_iter().map(|(_, p, k)| (p, k)).collect();
            assert_eq!(got, want, "cut {cut}");
        }
        // One byte per read: the frame is stamped with the read that completed it.
        let bytes: Vec<&[u8]> = VLLM.chunks(1).collect();
        let (s, _) = run(&bytes);
        let p = payloads(&s);
        assert_eq!(p.len(), 3);
        let first_end = VLLM.windows(2).position(|w| w == b"\n\n").unwrap() + 1;
        assert_eq!(p[0].0, 100 + first_end as u64);
    }

    #[test]
    fn crlf_and_cr_line_ends_including_crlf_split_across_reads() {
        let crlf = b"data: x\r\n\r\ndata: [DONE]\r\n\r\n";
        let (s, eof) = run(&[crlf]);
        assert!(eof.clean());
        assert_eq!(
            payloads(&s)
                .iter()
                .map(|p| p.1.as_str())
                .collect::<Vec<_>>(),
            ["x", "[DONE]"]
        );
        // CR | LF split: must not produce an extra blank line (which would be harmless here, but
        // would dispatch early if a frame had two data lines).
        let (s, _) = run(&[b"data: a\r", b"\ndata: b\r\n\r\n"]);
        assert_eq!(payloads(&s)[0].1, "a\nb");
        let (s, _) = run(&[b"data: a\rdata: b\r\r"]);
        assert_eq!(payloads(&s)[0].1, "a\nb");
    }

    #[test]
    fn comments_fields_and_multiline_data() {
        let (s, eof) = run(&[
            b": keep-alive\n\n",
            b"id: 7\nretry: 100\nfoo\ndata\ndata:x\ndata:  y\n\n",
            b":another\ndata: z\n\n",
        ]);
        assert!(eof.clean());
        assert_eq!(s.comments, 2);
        // `data` with no colon is an empty value; `data:x` has no space; only one space stripped.
        assert_eq!(
            payloads(&s).iter().map(|p| p.1.clone()).collect::<Vec<_>>(),
            ["\nx\n y", "z"]
        );
    }

    #[test]
    fn blank_lines_without_data_do_not_dispatch() {
        let (s, _) = run(&[b"\n\n\nevent: error\n\ndata: a\n\n"]);
        let p = payloads(&s);
        assert_eq!(p.len(), 1);
        // The `event: error` was reset by the blank line that did not dispatch.
        assert_eq!(p[0].2, FrameKind::Data);
    }

    #[test]
    fn error_events_and_error_payloads() {
        let (s, _) =
            run(&[b"event: error\ndata: {\"message\":\"boom\"}\n\ndata: {\"error\":{}}\n\n"]);
        let p = payloads(&s);
        assert_eq!(p[0].2, FrameKind::ErrorEvent);
        assert_eq!(p[1].2, FrameKind::Data); // JSON-level errors are found by the writer
        assert_eq!(s.error_event_t_ns, Some(100));
    }

    #[test]
    fn unexpected_eof_discards_and_reports() {
        let (s, eof) = run(&[b"data: {\"a\":1}\n\ndata: {\"b\""]);
        assert_eq!(payloads(&s).len(), 1);
        assert_eq!(eof.partial_line_bytes, b"data: {\"b\"".len());
        let (s, eof) = run(&[b"data: {\"a\":1}\n\ndata: [DONE]\n"]);
        assert_eq!(payloads(&s).len(), 1);
        assert!(eof.undispatched_frame);
        assert_eq!(s.done_t_ns, None);
        assert_eq!(s.data, b"{\"a\":1}");
    }

    #[test]
    fn no_line_length_cap() {
        let big = "7,".repeat(2_000_000);
        let line = format!("data: {{\"prompt_token_ids\":[{big}0]}}\n\n");
        let chunks: Vec<&[u8]> = line.as_bytes().chunks(65_536).collect();
        let (s, eof) = run(&chunks);
        assert!(eof.clean());
        assert_eq!(s.frames.len(), 1);
        assert_eq!(s.payload(&s.frames[0]).len(), line.len() - 8);
    }

    #[test]
    fn bom_is_stripped_even_when_split() {
        let (s, _) = run(&[b"\xEF\xBB", b"\xBFdata: a\n\n"]);
        assert_eq!(payloads(&s)[0].1, "a");
    }
}
