//! Every record accounted for: per cell, each request record read is **kept**, **rejected** by
//! a named [`Rule`], dropped as a **duplicate**, or dropped as an **identity mismatch** (a field
//! naming another config, launch, phase or cell than its file and run directory). Each problem
//! is one warning naming `file:line`; the counts are the cell's [`CellAccount`], listed in the
//! report. The same module decides, from the evidence, whether a cell's data is whole
//! ([`CellAccount::incomplete`]): an empty requests file, a stream cut short, no collector
//! summary, fewer records than the collector scheduled, or more than
//! [`MAX_PROBLEM_SHARE`] of the records rejected or duplicated.
//!
//! Only kept records reach the analysis, so the point estimates and the bootstrap samples are
//! computed from the same records.
//!
//! Length: 486 lines of code; the rest of the file is its unit tests (kept next to the rules).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use ctax_schema::{Cell, CellHealth, Phase, RequestRecord, Status};
use serde::{Deserialize, Serialize};

use super::jsonl::Lines;

/// Problems listed one per line for each file; the rest are counted in one line.
const LISTED_PER_FILE: usize = 20;
/// A cell with more than this share of its records rejected, duplicated or mismatched is
/// incomplete (1%: real runs have none; a single bad record in a cell of a few hundred is
/// dropped with a warning and the cell stays usable).
const MAX_PROBLEM_SHARE: f64 = 0.01;
/// How far outside the collector's cell window (first intended send → drain finished) a
/// record's timestamps may lie.
const WINDOW_SLACK_NS: u64 = 60 * 1_000_000_000;
/// The longest a cell can span (plans allow durations up to 30 days); also the allowed
/// distance from the median intended send when there is no collector summary.
const MAX_CELL_SPAN_NS: u64 = 31 * 86_400 * 1_000_000_000;

/// Why a record was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Status `ok` but `t_send_ns`, `t_first_token_ns`, `t_last_token_ns`, `t_end_ns` or
    /// `completion_tokens` is null.
    OkWithoutField,
    /// A timestamp (or event time) more than [`WINDOW_SLACK_NS`] outside the collector's cell
    /// window, or more than [`MAX_CELL_SPAN_NS`] from the cell's median intended send.
    OutsideWindow,
    /// `t_first_token_ns < t_send_ns` (a negative TTFT).
    FirstTokenBeforeSend,
    /// `t_last_token_ns < t_first_token_ns` (a negative TPOT).
    LastTokenBeforeFirst,
    /// `t_end_ns < t_last_token_ns`.
    EndBeforeLastToken,
    /// Events out of time order, or the first/last event is not at
    /// `t_first_token_ns`/`t_last_token_ns`.
    EventsDisagree,
    /// `completion_tokens` above `output_len` (the request's `max_tokens`), below the tokens
    /// its events carry, zero, or without any token event on an `ok` record.
    CompletionTokens,
}

impl Rule {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Rule::OkWithoutField => "ok_without_field",
            Rule::OutsideWindow => "outside_window",
            Rule::FirstTokenBeforeSend => "first_token_before_send",
            Rule::LastTokenBeforeFirst => "last_token_before_first",
            Rule::EndBeforeLastToken => "end_before_last_token",
            Rule::EventsDisagree => "events_disagree",
            Rule::CompletionTokens => "completion_tokens",
        }
    }
}

/// The accounting of one cell of one run (its requests file).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CellAccount {
    /// The requests file used (name in the run directory).
    pub file: Option<String>,
    /// Records parsed from it.
    pub read: u64,
    /// Records that reach the statistics.
    pub kept: u64,
    /// Records rejected, by rule.
    pub rejected: BTreeMap<Rule, u64>,
    /// The same line twice, or the same `request_id` twice (the first is kept).
    pub duplicates: u64,
    /// Records whose identity fields disagree with the file name or the run directory.
    pub identity_mismatches: u64,
    /// Why the evidence says the cell's data is not whole; empty when it is.
    pub incomplete: Vec<String>,
}

impl CellAccount {
    fn rejected_total(&self) -> u64 {
        self.rejected.values().sum()
    }

    /// Records read but not kept.
    pub(crate) fn dropped(&self) -> u64 {
        self.rejected_total() + self.duplicates + self.identity_mismatches
    }

    /// Nothing dropped, nothing missing.
    pub fn clean(&self) -> bool {
        self.dropped() == 0 && self.incomplete.is_empty()
    }
}

/// A cell's accounting with where it was measured: one row of the report's accounting table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AccountRow {
    pub run: String,
    pub config: String,
    pub launch: u32,
    pub phase: Phase,
    /// Canonical cell name.
    pub cell: String,
    #[serde(flatten)]
    pub account: CellAccount,
}

/// What a requests file's records must say about themselves.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Identity<'a> {
    /// From `config.json` (else the directory name).
    pub config: &'a str,
    pub launch: u32,
    /// From the file name.
    pub phase: Phase,
    pub cell: &'a Cell,
}

/// The outcome of [`account_requests`].
#[derive(Debug)]
pub(crate) struct Accounted {
    pub kept: Vec<RequestRecord>,
    pub account: CellAccount,
    pub warnings: Vec<String>,
}

/// Why a collector health record cannot give a window, if it cannot.
pub(crate) fn health_problem(h: &CellHealth) -> Option<String> {
    let later = [h.t_warmup_end_ns, h.t_last_send_ns, h.t_end_ns];
    if later.iter().any(|&t| t < h.t_start_ns) {
        return Some(format!(
            "summary.json's window for this cell is inconsistent (t_start_ns {} after \
             t_warmup_end_ns {}, t_last_send_ns {} or t_end_ns {})",
            h.t_start_ns, h.t_warmup_end_ns, h.t_last_send_ns, h.t_end_ns
        ));
    }
    let end = later.into_iter().max().unwrap_or(h.t_start_ns);
    (end - h.t_start_ns > MAX_CELL_SPAN_NS).then(|| {
        format!(
            "summary.json's window for this cell spans {:.3e} s (more than 31 days)",
            (end - h.t_start_ns) as f64 / 1e9
        )
    })
}

/// Accounts for the records of one requests file (`lines`, read from `path`). `health` is the
/// collector's record of the cell, or why there is none (no `summary.json`, no entry for the
/// cell, an inconsistent window): its absence makes the cell incomplete.
pub(crate) fn account_requests(
    path: &Path,
    lines: Lines<RequestRecord>,
    id: &Identity,
    health: Result<&CellHealth, String>,
) -> Accounted {
    let file = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let mut account = CellAccount {
        file: Some(file.clone()),
        read: lines.rows.len() as u64,
        ..Default::default()
    };
    let mut problems: Vec<String> = Vec::new();
    let listed = |problems: &mut Vec<String>, line: usize, what: String| {
        problems.push(format!(
            "{}:{line}: {what}; record not used",
            path.display()
        ));
    };
    let Lines {
        rows, line_numbers, ..
    } = lines;

    // 1. Identity.
    let mut ok_identity: Vec<(usize, RequestRecord)> = Vec::with_capacity(rows.len());
    for (r, line) in rows.into_iter().zip(line_numbers) {
        let diffs = identity_diffs(&r, id);
        if diffs.is_empty() {
            ok_identity.push((line, r));
        } else {
            account.identity_mismatches += 1;
            listed(
                &mut problems,
                line,
                format!(
                    "identity mismatch: {} (file name, config.json)",
                    diffs.join(", ")
                ),
            );
        }
    }

    // 2. Duplicates: the same request_id again (the same line, or another record claiming it).
    let mut first: HashMap<String, usize> = HashMap::with_capacity(ok_identity.len());
    let mut unique: Vec<(usize, RequestRecord)> = Vec::with_capacity(ok_identity.len());
    for (line, r) in ok_identity {
        match first.get(&r.request_id) {
            Some(&i) => {
                account.duplicates += 1;
                let (first_line, first_rec) = &unique[i];
                let what = if *first_rec == r {
                    format!("duplicate: repeats line {first_line} exactly")
                } else {
                    format!(
                        "duplicate: request_id `{}` already on line {first_line} (with different \
                         content)",
                        r.request_id
                    )
                };
                listed(&mut problems, line, what);
            }
            None => {
                first.insert(r.request_id.clone(), unique.len());
                unique.push((line, r));
            }
        }
    }

    // 3. Validity, inside the cell's span.
    let span = match &health {
        Ok(h) => (
            h.t_start_ns.saturating_sub(WINDOW_SLACK_NS),
            h.t_end_ns
                .max(h.t_last_send_ns)
                .saturating_add(WINDOW_SLACK_NS),
        ),
        Err(_) => {
            let mut t: Vec<u64> = unique.iter().map(|(_, r)| r.t_intended_ns).collect();
            t.sort_unstable();
            let mid = t.get(t.len() / 2).copied().unwrap_or(0);
            (
                mid.saturating_sub(MAX_CELL_SPAN_NS),
                mid.saturating_add(MAX_CELL_SPAN_NS),
            )
        }
    };
    let mut kept = Vec::with_capacity(unique.len());
    for (line, r) in unique {
        match validity(&r, span, id.cell.output_len) {
            None => kept.push(r),
            Some((rule, what)) => {
                *account.rejected.entry(rule).or_default() += 1;
                listed(
                    &mut problems,
                    line,
                    format!("rejected ({}): {what}", rule.as_str()),
                );
            }
        }
    }
    account.kept = kept.len() as u64;

    // 4. Is the cell whole?
    if account.read == 0 {
        account.incomplete.push(format!(
            "`{file}` has no records (empty or whitespace-only)"
        ));
    }
    match &health {
        Err(why) => account.incomplete.push(why.clone()),
        Ok(h) => {
            let distinct = account.read - account.duplicates;
            if account.read > 0 && distinct != h.scheduled {
                account.incomplete.push(format!(
                    "`{file}` holds {distinct} distinct records; the collector scheduled {}",
                    h.scheduled
                ));
            }
        }
    }
    let dropped = account.dropped();
    if dropped as f64 > MAX_PROBLEM_SHARE * account.read as f64 {
        account.incomplete.push(format!(
            "{dropped} of {} records in `{file}` rejected, duplicated or mismatched (more than \
             {}%)",
            account.read,
            MAX_PROBLEM_SHARE * 100.0
        ));
    }

    let mut warnings: Vec<String> = problems.iter().take(LISTED_PER_FILE).cloned().collect();
    if problems.len() > LISTED_PER_FILE {
        let by_rule: Vec<String> = [
            ("identity", account.identity_mismatches),
            ("duplicate", account.duplicates),
        ]
        .into_iter()
        .chain(account.rejected.iter().map(|(rule, n)| (rule.as_str(), *n)))
        .filter(|(_, n)| *n > 0)
        .map(|(r, n)| format!("{r} {n}"))
        .collect();
        warnings.push(format!(
            "{}: {} more records not used, not listed one by one ({} in all: {})",
            path.display(),
            problems.len() - LISTED_PER_FILE,
            problems.len(),
            by_rule.join(", ")
        ));
    }
    Accounted {
        kept,
        account,
        warnings,
    }
}

/// The identity fields of `r` that disagree with `id`, in words.
fn identity_diffs(r: &RequestRecord, id: &Identity) -> Vec<String> {
    let mut d = Vec::new();
    if r.config != id.config {
        d.push(format!("config `{}` (expected `{}`)", r.config, id.config));
    }
    if r.launch != id.launch {
        d.push(format!("launch {} (expected {})", r.launch, id.launch));
    }
    if r.phase != id.phase {
        d.push(format!("phase {} (expected {})", r.phase, id.phase));
    }
    if Cell::parse(&r.cell).as_ref() != Some(id.cell) {
        d.push(format!("cell `{}` (expected `{}`)", r.cell, id.cell.name()));
    }
    if r.rate != id.cell.rate {
        d.push(format!("rate {} (expected {})", r.rate, id.cell.rate));
    }
    if r.input_len != id.cell.input_len {
        d.push(format!(
            "input_len {} (expected {})",
            r.input_len, id.cell.input_len
        ));
    }
    if r.output_len != id.cell.output_len {
        d.push(format!(
            "output_len {} (expected {})",
            r.output_len, id.cell.output_len
        ));
    }
    if !request_id_matches(&r.request_id, id, r.seq) {
        d.push(format!(
            "request_id `{}` (expected `{}`)",
            r.request_id,
            ctax_schema::request_id(id.config, id.launch, id.phase, &id.cell.name(), r.seq)
        ));
    }
    d
}

/// `<config>/l<launch>/<phase>/<cell>/<seq>` naming this cell and `seq` (the cell may be
/// spelled non-canonically, as in its file name).
fn request_id_matches(rid: &str, id: &Identity, seq: u64) -> bool {
    let mut parts = rid.rsplitn(5, '/');
    let (Some(s), Some(cell), Some(phase), Some(launch), Some(config)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return false;
    };
    config == id.config
        && launch.strip_prefix('l').and_then(|l| l.parse().ok()) == Some(id.launch)
        && Phase::from_tag(phase) == Some(id.phase)
        && Cell::parse(cell).as_ref() == Some(id.cell)
        && s.parse::<u64>().ok() == Some(seq)
}

/// The first rule `r` breaks, with the values that break it.
fn validity(r: &RequestRecord, (lo, hi): (u64, u64), output_len: u32) -> Option<(Rule, String)> {
    if r.status == Status::Ok {
        let missing = [
            ("t_send_ns", r.t_send_ns.is_none()),
            ("t_first_token_ns", r.t_first_token_ns.is_none()),
            ("t_last_token_ns", r.t_last_token_ns.is_none()),
            ("t_end_ns", r.t_end_ns.is_none()),
            ("completion_tokens", r.completion_tokens.is_none()),
        ];
        if let Some((f, _)) = missing.iter().find(|(_, m)| *m) {
            return Some((Rule::OkWithoutField, format!("status ok but `{f}` is null")));
        }
    }
    let stamps = [
        ("t_intended_ns", Some(r.t_intended_ns)),
        ("t_send_ns", r.t_send_ns),
        ("t_first_token_ns", r.t_first_token_ns),
        ("t_last_token_ns", r.t_last_token_ns),
        ("t_end_ns", r.t_end_ns),
    ];
    let events = r.events.iter().map(|e| ("an event time", Some(e.t_ns())));
    for (name, t) in stamps.into_iter().chain(events) {
        if let Some(t) = t.filter(|t| *t < lo || *t > hi) {
            return Some((
                Rule::OutsideWindow,
                format!("{name} {t} lies outside the cell's span [{lo}, {hi}] ns"),
            ));
        }
    }
    let ms = |a: u64, b: u64| (a - b) as f64 / 1e6;
    if let (Some(s), Some(f)) = (r.t_send_ns, r.t_first_token_ns)
        && f < s
    {
        return Some((
            Rule::FirstTokenBeforeSend,
            format!("t_first_token_ns is {} ms before t_send_ns", ms(s, f)),
        ));
    }
    if let (Some(f), Some(l)) = (r.t_first_token_ns, r.t_last_token_ns)
        && l < f
    {
        return Some((
            Rule::LastTokenBeforeFirst,
            format!("t_last_token_ns is {} ms before t_first_token_ns", ms(f, l)),
        ));
    }
    if let (Some(l), Some(e)) = (r.t_last_token_ns, r.t_end_ns)
        && e < l
    {
        return Some((
            Rule::EndBeforeLastToken,
            format!("t_end_ns is {} ms before t_last_token_ns", ms(l, e)),
        ));
    }
    if r.events.windows(2).any(|w| w[1].t_ns() < w[0].t_ns()) {
        return Some((Rule::EventsDisagree, "events out of time order".into()));
    }
    let bounds = (
        r.events.first().map(|e| e.t_ns()),
        r.events.last().map(|e| e.t_ns()),
    );
    if bounds != (r.t_first_token_ns, r.t_last_token_ns) {
        return Some((
            Rule::EventsDisagree,
            format!(
                "first/last event at {:?}/{:?} but t_first_token_ns/t_last_token_ns {:?}/{:?}",
                bounds.0, bounds.1, r.t_first_token_ns, r.t_last_token_ns
            ),
        ));
    }
    if let Some(c) = r.completion_tokens {
        let carried: u64 = r.events.iter().map(|e| u64::from(e.tokens())).sum();
        let what = if c > output_len {
            Some(format!(
                "completion_tokens {c} above output_len (max_tokens) {output_len}"
            ))
        } else if carried > u64::from(c) {
            Some(format!(
                "events carry {carried} tokens but completion_tokens is {c}"
            ))
        } else if r.status == Status::Ok && c == 0 {
            Some("status ok with completion_tokens 0".into())
        } else if r.status == Status::Ok && r.events.is_empty() {
            Some(format!(
                "status ok, completion_tokens {c}, but no token event"
            ))
        } else {
            None
        };
        if let Some(w) = what {
            return Some((Rule::CompletionTokens, w));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctax_schema::{Arrival, Event};
    use std::path::PathBuf;

    /// Changes one record.
    type Spoil = Box<dyn Fn(&mut RequestRecord)>;

    const CELL: Cell = Cell {
        rate: 4.0,
        input_len: 8,
        output_len: 4,
    };

    fn id() -> Identity<'static> {
        Identity {
            config: "plain",
            launch: 0,
            phase: Phase::A,
            cell: &CELL,
        }
    }

    /// A valid ok record: sent at 10 s + seq·250 ms, first token 100 ms later, 4 tokens in 4
    /// events 10 ms apart.
    fn rec(seq: u64) -> RequestRecord {
        let send = 10_000_000_000 + seq * 250_000_000;
        let first = send + 100_000_000;
        RequestRecord {
            request_id: ctax_schema::request_id("plain", 0, Phase::A, "r4_i8_o4", seq),
            config: "plain".into(),
            launch: 0,
            phase: Phase::A,
            cell: "r4_i8_o4".into(),
            rate: 4.0,
            input_len: 8,
            output_len: 4,
            seq,
            t_intended_ns: send,
            t_send_ns: Some(send),
            t_first_token_ns: Some(first),
            t_last_token_ns: Some(first + 30_000_000),
            t_end_ns: Some(first + 31_000_000),
            events: (0..4).map(|k| Event(first + k * 10_000_000, 1)).collect(),
            prompt_tokens: Some(8),
            completion_tokens: Some(4),
            inflight_at_send: 0,
            warmup: false,
            status: Status::Ok,
            http_status: Some(200),
            error: None,
        }
    }

    fn health(n: u64) -> CellHealth {
        CellHealth {
            phase: Phase::A,
            cell: "r4_i8_o4".into(),
            rate: 4.0,
            input_len: 8,
            output_len: 4,
            arrival: Arrival::Fixed,
            seed: 0,
            t_start_ns: 10_000_000_000,
            t_warmup_end_ns: 10_000_000_000,
            t_last_send_ns: 10_000_000_000 + (n - 1) * 250_000_000,
            t_end_ns: 10_000_000_000 + n * 250_000_000 + 200_000_000,
            wall_start_unix_ms: 0,
            scheduled: n,
            sent: n,
            dropped: 0,
            ok: n,
            errors: 0,
            cancelled: 0,
            completed_measured: n,
            complete: true,
            incomplete_reason: None,
            lateness_us_p50: 1.0,
            lateness_us_p99: 1.0,
            lateness_us_max: 1.0,
            client_cpu_pct: 1.0,
            scrapes: 0,
            scrape_failures: 0,
        }
    }

    fn lines(rows: Vec<RequestRecord>) -> Lines<RequestRecord> {
        Lines {
            line_numbers: (1..=rows.len()).collect(),
            rows,
            warnings: vec![],
            cut_short: None,
        }
    }

    fn path() -> PathBuf {
        PathBuf::from("/run/requests_A_r4_i8_o4.jsonl")
    }

    #[test]
    fn clean_records_are_all_kept() {
        let rows: Vec<_> = (0..200).map(rec).collect();
        let a = account_requests(&path(), lines(rows), &id(), Ok(&health(200)));
        assert_eq!(a.kept.len(), 200);
        assert!(a.account.clean(), "{:?}", a.account);
        assert!(a.warnings.is_empty());
    }

    /// Each rule on one record of 200 (0.5%, under the 1% limit): the record is dropped with
    /// one warning naming file:line and the rule; the cell stays whole.
    #[test]
    fn each_rule_rejects_its_record_with_a_warning_naming_file_and_line() {
        let near_2_64 = u64::MAX - 5;
        let cases: Vec<(Rule, Spoil)> = vec![
            (Rule::OkWithoutField, Box::new(|r| r.t_end_ns = None)),
            (
                Rule::OutsideWindow,
                Box::new(move |r| {
                    r.t_last_token_ns = Some(near_2_64);
                    r.events.last_mut().unwrap().0 = near_2_64;
                    r.t_end_ns = Some(near_2_64);
                }),
            ),
            (
                Rule::FirstTokenBeforeSend,
                Box::new(|r| {
                    let t = r.t_send_ns.unwrap() - 1_000_000;
                    r.t_first_token_ns = Some(t);
                    r.events[0].0 = t;
                }),
            ),
            (
                Rule::LastTokenBeforeFirst,
                Box::new(|r| {
                    let t = r.t_first_token_ns.unwrap() - 1;
                    r.t_last_token_ns = Some(t);
                }),
            ),
            (
                Rule::EndBeforeLastToken,
                Box::new(|r| r.t_end_ns = Some(r.t_last_token_ns.unwrap() - 1)),
            ),
            (Rule::EventsDisagree, Box::new(|r| r.events.swap(1, 2))),
            (
                Rule::CompletionTokens,
                Box::new(|r| r.completion_tokens = Some(9)),
            ),
            (
                Rule::CompletionTokens,
                Box::new(|r| r.completion_tokens = Some(3)),
            ),
        ];
        for (rule, spoil) in cases {
            let mut rows: Vec<_> = (0..200).map(rec).collect();
            spoil(&mut rows[17]);
            let a = account_requests(&path(), lines(rows), &id(), Ok(&health(200)));
            assert_eq!(a.kept.len(), 199, "{rule:?}");
            assert_eq!(a.account.rejected.get(&rule), Some(&1), "{:?}", a.account);
            assert_eq!(a.warnings.len(), 1, "{:?}", a.warnings);
            let w = &a.warnings[0];
            assert!(
                w.starts_with("/run/requests_A_r4_i8_o4.jsonl:18: rejected (")
                    && w.contains(rule.as_str()),
                "{w}"
            );
            assert!(a.account.incomplete.is_empty(), "{:?}", a.account);
        }
    }

    #[test]
    fn duplicates_are_counted_once_and_named() {
        let mut rows: Vec<_> = (0..150).map(rec).collect();
        rows.push(rec(3)); // the same line again
        let mut other = rec(5);
        other.t_end_ns = Some(other.t_end_ns.unwrap() + 1);
        rows.push(other); // the same request_id, other content
        let a = account_requests(&path(), lines(rows), &id(), Ok(&health(150)));
        assert_eq!(a.kept.len(), 150);
        assert_eq!(a.account.duplicates, 2);
        assert_eq!(
            a.warnings,
            vec![
                "/run/requests_A_r4_i8_o4.jsonl:151: duplicate: repeats line 4 exactly; record \
                 not used"
                    .to_owned(),
                "/run/requests_A_r4_i8_o4.jsonl:152: duplicate: request_id \
                 `plain/l0/A/r4_i8_o4/5` already on line 6 (with different content); record \
                 not used"
                    .to_owned(),
            ]
        );
        // 2 of 152 > 1%: the cell is not whole.
        assert_eq!(a.account.incomplete.len(), 1, "{:?}", a.account);
    }

    #[test]
    fn every_identity_field_is_checked() {
        let spoils: Vec<(&str, Spoil)> = vec![
            ("config `noop`", Box::new(|r| r.config = "noop".into())),
            ("launch 1", Box::new(|r| r.launch = 1)),
            ("phase B", Box::new(|r| r.phase = Phase::B)),
            ("cell `r8_i8_o4`", Box::new(|r| r.cell = "r8_i8_o4".into())),
            ("rate 8 (expected 4)", Box::new(|r| r.rate = 8.0)),
            ("input_len 9", Box::new(|r| r.input_len = 9)),
            ("output_len 5", Box::new(|r| r.output_len = 5)),
            (
                "request_id `plain/l0/A/r4_i8_o4/99`",
                Box::new(|r| r.request_id = "plain/l0/A/r4_i8_o4/99".into()),
            ),
        ];
        for (what, spoil) in spoils {
            let mut rows: Vec<_> = (0..4).map(rec).collect();
            spoil(&mut rows[2]);
            let a = account_requests(&path(), lines(rows), &id(), Ok(&health(4)));
            assert_eq!(a.account.identity_mismatches, 1, "{what}");
            assert_eq!(a.kept.len(), 3);
            assert!(
                a.warnings[0].starts_with("/run/requests_A_r4_i8_o4.jsonl:3: identity mismatch: ")
                    && a.warnings[0].contains(what),
                "{what}: {}",
                a.warnings[0]
            );
        }
        // A non-canonical spelling of the same cell is the same identity.
        let mut r = rec(0);
        r.cell = "r4.0_i8_o4".into();
        r.request_id = "plain/l0/A/r4.0_i8_o4/0".into();
        let a = account_requests(&path(), lines(vec![r]), &id(), Ok(&health(1)));
        assert_eq!(a.kept.len(), 1, "{:?}", a.warnings);
    }

    #[test]
    fn evidence_of_an_incomplete_cell() {
        // Empty file.
        let a = account_requests(&path(), lines(vec![]), &id(), Ok(&health(10)));
        assert_eq!(
            a.account.incomplete,
            vec!["`requests_A_r4_i8_o4.jsonl` has no records (empty or whitespace-only)"]
        );
        // Fewer records than the collector scheduled.
        let rows: Vec<_> = (0..5).map(rec).collect();
        let a = account_requests(&path(), lines(rows), &id(), Ok(&health(10)));
        assert_eq!(
            a.account.incomplete,
            vec![
                "`requests_A_r4_i8_o4.jsonl` holds 5 distinct records; the collector scheduled 10"
            ]
        );
        // No collector summary: the reason is kept, and the span comes from the records.
        let mut rows: Vec<_> = (0..10).map(rec).collect();
        rows[4].t_end_ns = Some(u64::MAX);
        let a = account_requests(&path(), lines(rows), &id(), Err("no summary.json".into()));
        assert_eq!(
            a.account.incomplete,
            vec![
                "no summary.json",
                "1 of 10 records in `requests_A_r4_i8_o4.jsonl` rejected, duplicated or mismatched (more than 1%)"
            ]
        );
        assert_eq!(a.account.rejected.get(&Rule::OutsideWindow), Some(&1));
    }

    #[test]
    fn many_problems_are_listed_up_to_the_limit_then_counted() {
        let mut rows: Vec<_> = (0..100).map(rec).collect();
        for r in rows.iter_mut().take(30) {
            r.rate = 2.0;
        }
        let a = account_requests(&path(), lines(rows), &id(), Ok(&health(100)));
        assert_eq!(a.account.identity_mismatches, 30);
        assert_eq!(a.warnings.len(), LISTED_PER_FILE + 1);
        assert_eq!(
            a.warnings[LISTED_PER_FILE],
            "/run/requests_A_r4_i8_o4.jsonl: 10 more records not used, not listed one by one \
             (30 in all: identity 30)"
        );
    }

    #[test]
    fn inconsistent_health() {
        let mut h = health(10);
        assert_eq!(health_problem(&h), None);
        h.t_end_ns = u64::MAX;
        assert!(health_problem(&h).unwrap().contains("more than 31 days"));
        h.t_start_ns = u64::MAX;
        assert!(health_problem(&h).unwrap().contains("inconsistent"));
    }
}
