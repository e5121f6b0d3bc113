//! Dates: a document's date as its source gave it, read into an instant (seconds since the Unix
//! epoch, UTC) that filters compare; the ranges the APIs ask for; and the instant written back
//! the way each API writes dates. Every date rule of stillweb is here, once.

use chrono::{DateTime, Datelike, Months, NaiveDate, NaiveDateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

/// Seconds in a day.
pub const DAY: i64 = 86_400;

/// A document's date read as the instant it names (a date alone: its first second, UTC), or
/// `None` when it names none: empty, unreadable, or the corpus's stand-in for no date
/// ([`crate::manifest::NO_DATE`], any time on 1970-01-01).
///
/// Reads what the sources write: `YYYY`, `YYYY-MM`, `YYYY-MM-DD`, and a date with a time
/// (`T` or a space between, optional fraction, `Z` or an offset; none is UTC).
pub fn document_instant(text: &str) -> Option<i64> {
    let t = read_iso(text.trim())?;
    (!(0..DAY).contains(&t)).then_some(t)
}

/// An ISO 8601 date or date-time as above (a four-digit year), including 1970-01-01.
fn read_iso(text: &str) -> Option<i64> {
    let four_digit_year = text.len() >= 4
        && text.as_bytes()[..4].iter().all(u8::is_ascii_digit)
        && text.as_bytes().get(4).is_none_or(|&b| b == b'-');
    if !four_digit_year {
        return None;
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Some(t.timestamp());
    }
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f%:z",
        "%Y-%m-%dT%H:%M:%S%.f%z",
        "%Y-%m-%d %H:%M:%S%.f%:z",
        "%Y-%m-%d %H:%M:%S%.f%z",
    ] {
        if let Ok(t) = DateTime::parse_from_str(text, format) {
            return Some(t.timestamp());
        }
    }
    let bare = text.strip_suffix('Z').unwrap_or(text);
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(bare, format) {
            return Some(t.and_utc().timestamp());
        }
    }
    if let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Some(start_of(day));
    }
    year_or_month(text)
}

/// `YYYY` or `YYYY-MM`: the first second of that year or month.
fn year_or_month(text: &str) -> Option<i64> {
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let (year, month) = match text.split_once('-') {
        None if digits(text, 4) => (text, "01"),
        Some((y, m)) if digits(y, 4) && digits(m, 2) => (y, m),
        _ => return None,
    };
    let day = NaiveDate::from_ymd_opt(year.parse().ok()?, month.parse().ok()?, 1)?;
    Some(start_of(day))
}

fn start_of(day: NaiveDate) -> i64 {
    day.and_hms_opt(0, 0, 0)
        .map_or(0, |t| t.and_utc().timestamp())
}

fn utc(t: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(t, 0).unwrap_or_default()
}

/// A calendar day `YYYY-MM-DD` (what most APIs take): its first second.
pub fn parse_day(text: &str) -> Result<i64, String> {
    let text = text.trim();
    if text.len() == 10
        && let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d")
    {
        return Ok(start_of(day));
    }
    Err(format!("`{text}` is not a date; write YYYY-MM-DD"))
}

/// A US calendar day `M/D/YYYY` (Google's custom range): its first second.
pub fn parse_us_day(text: &str) -> Result<i64, String> {
    let text = text.trim();
    NaiveDate::parse_from_str(text, "%m/%d/%Y")
        .ok()
        .filter(|d| (1000..=9999).contains(&d.year()))
        .map(start_of)
        .ok_or_else(|| format!("`{text}` is not a date; write M/D/YYYY"))
}

/// A date `YYYY-MM-DD` or an ISO 8601 date-time (`2024-03-05T12:00:00Z`, an offset or none,
/// which is UTC): the instant it names.
pub fn parse_instant(text: &str) -> Result<i64, String> {
    let text = text.trim();
    match text.len() > 10 {
        true => read_iso(text).ok_or_else(|| {
            format!("`{text}` is not an ISO 8601 date-time; write e.g. 2024-03-05T12:00:00Z")
        }),
        false => parse_day(text).map_err(|_| {
            format!(
                "`{text}` is not an ISO 8601 date; write YYYY-MM-DD or e.g. 2024-03-05T12:00:00Z"
            )
        }),
    }
}

/// "The web as of `text`" (a day, which it includes, or an ISO 8601 instant, itself
/// included): the first instant it does not see.
pub fn as_of_cutoff(text: &str) -> Result<i64, String> {
    let at = parse_instant(text)?;
    Ok(at + if text.trim().len() <= 10 { DAY } else { 1 })
}

/// A day, month or year (`YYYY-MM-DD`, `YYYY-MM`, `YYYY`), as Google's `after:` and `before:`
/// take: the period's first second and the first second after it.
pub fn parse_period(text: &str) -> Option<(i64, i64)> {
    if let Ok(start) = parse_day(text) {
        return Some((start, start + DAY));
    }
    let start = year_or_month(text)?;
    let months = if text.len() == 4 { 12 } else { 1 };
    Some((start, months_after(start, months)))
}

/// `t` moved `months` calendar months back (the day clamped to the month's length).
pub fn months_before(t: i64, months: u32) -> i64 {
    utc(t)
        .checked_sub_months(Months::new(months))
        .map_or(i64::MIN, |d| d.timestamp())
}

fn months_after(t: i64, months: u32) -> i64 {
    utc(t)
        .checked_add_months(Months::new(months))
        .map_or(i64::MAX, |d| d.timestamp())
}

/// The instants a filter keeps: from `from` (inclusive) until `until` (exclusive); an open end
/// bounds nothing. A document without a date is in no bounded range.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DateRange {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<i64>,
}

impl DateRange {
    /// Every instant at or after `from`.
    pub fn since(from: i64) -> DateRange {
        DateRange {
            from: Some(from),
            until: None,
        }
    }

    /// Every instant before `until`.
    pub fn before(until: i64) -> DateRange {
        DateRange {
            from: None,
            until: Some(until),
        }
    }

    /// `[from, until)`.
    pub fn between(from: i64, until: i64) -> DateRange {
        DateRange {
            from: Some(from),
            until: Some(until),
        }
    }

    /// Whether it restricts anything.
    pub fn is_bounded(&self) -> bool {
        self.from.is_some() || self.until.is_some()
    }

    /// Whether it restricts nothing.
    pub fn is_unbounded(&self) -> bool {
        !self.is_bounded()
    }

    /// The instants both keep.
    pub fn intersect(self, other: DateRange) -> DateRange {
        DateRange {
            from: max_of(self.from, other.from),
            until: min_of(self.until, other.until),
        }
    }

    /// Whether a document dated `date` (`None`: undated) is kept.
    pub fn keeps(&self, date: Option<i64>) -> bool {
        match date {
            None => !self.is_bounded(),
            Some(t) => self.from.is_none_or(|f| t >= f) && self.until.is_none_or(|u| t < u),
        }
    }
}

/// A period back from a clock: Google's `qdr:d3`, Tavily's `week`, Brave's `pm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Past {
    Hours(u32),
    Days(u32),
    Weeks(u32),
    Months(u32),
    Years(u32),
}

impl Past {
    /// The instants from this period before `now` up to and including `now`.
    pub fn before(self, now: i64) -> DateRange {
        let from = match self {
            Past::Hours(n) => now.saturating_sub(i64::from(n) * 3600),
            Past::Days(n) => now.saturating_sub(i64::from(n) * DAY),
            Past::Weeks(n) => now.saturating_sub(i64::from(n) * 7 * DAY),
            Past::Months(n) => months_before(now, n),
            Past::Years(n) => months_before(now, n.saturating_mul(12)),
        };
        DateRange::between(from, now.saturating_add(1))
    }
}

/// A date filter as an API asks for it: fixed bounds, and a period back from the collection's
/// frozen clock, which only the collection searched knows (so it is resolved there).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DateFilter {
    pub range: DateRange,
    pub past: Option<Past>,
}

impl DateFilter {
    /// The instants it keeps on a collection whose clock reads `as_of` (`None`: it has no dated
    /// page, so a period back from it keeps none).
    pub fn resolve(&self, as_of: Option<i64>) -> DateRange {
        match self.past {
            None => self.range,
            Some(past) => match as_of {
                Some(now) => self.range.intersect(past.before(now)),
                None => DateRange::between(0, 0),
            },
        }
    }
}

fn max_of(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn min_of(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `2024-03-05`.
pub fn day(t: i64) -> String {
    utc(t).format("%Y-%m-%d").to_string()
}

/// `2024-03-05T12:00:00Z`: how manifests and `/info` write an instant.
pub fn rfc3339(t: i64) -> String {
    utc(t).format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `2024-03-05T12:00:00.000Z` (Exa's `publishedDate`).
pub fn rfc3339_millis(t: i64) -> String {
    utc(t).format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// `2024-03-05T12:00:00`, no zone (Brave's `page_age`).
pub fn local_iso(t: i64) -> String {
    utc(t).format("%Y-%m-%dT%H:%M:%S").to_string()
}

/// `Tue, 05 Mar 2024 12:00:00 GMT` (Tavily's `published_date`, an HTTP date).
pub fn http_date(t: i64) -> String {
    utc(t).format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

/// `March 5, 2024` (Brave's `age`).
pub fn long_date(t: i64) -> String {
    utc(t).format("%B %-d, %Y").to_string()
}

/// How Google writes a result's date: [`ago`] within a week of `now` (the collection's frozen
/// clock, never the wall clock), else `Mar 5, 2024`.
pub fn google_date(t: i64, now: i64) -> String {
    ago(t, now).unwrap_or_else(|| utc(t).format("%b %-d, %Y").to_string())
}

/// How Brave writes a result's `age`: [`ago`] within a week of `now`, else `March 5, 2024`.
pub fn brave_age(t: i64, now: i64) -> String {
    ago(t, now).unwrap_or_else(|| long_date(t))
}

/// `3 hours ago` or `3 days ago` when `t` is less than a week before `now`.
pub fn ago(t: i64, now: i64) -> Option<String> {
    let age = TimeDelta::seconds(now.saturating_sub(t));
    if age < TimeDelta::zero() || age >= TimeDelta::days(7) {
        return None;
    }
    Some(match age < TimeDelta::days(1) {
        true => {
            let hours = age.num_hours().max(1);
            format!("{hours} hour{} ago", plural(hours))
        }
        false => {
            let days = age.num_days();
            format!("{days} day{} ago", plural(days))
        }
    })
}

fn plural(n: i64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAR_5_2024: i64 = 1_709_596_800;

    #[test]
    fn sources_dates_are_read_and_the_stand_in_for_none_is_no_date() {
        assert_eq!(document_instant("2024-03-05"), Some(MAR_5_2024));
        assert_eq!(
            document_instant("2024-03-05T01:00:00Z"),
            Some(MAR_5_2024 + 3600)
        );
        assert_eq!(
            document_instant("2024-03-05T02:00:00+01:00"),
            Some(MAR_5_2024 + 3600)
        );
        assert_eq!(
            document_instant("2024-03-05 01:00:00"),
            Some(MAR_5_2024 + 3600)
        );
        assert_eq!(
            document_instant("2024-03-05T01:00:00.250Z"),
            Some(MAR_5_2024 + 3600)
        );
        assert_eq!(document_instant("2024-03"), Some(MAR_5_2024 - 4 * DAY));
        assert_eq!(document_instant("2024"), document_instant("2024-01-01"));
        for none in [
            "",
            "1970-01-01",
            "1970-01-01T05:00:00Z",
            "soon",
            "2024-13-01",
            "24-03-05",
        ] {
            assert_eq!(document_instant(none), None, "{none}");
        }
        assert!(document_instant("1969-12-31").is_some());
    }

    #[test]
    fn api_dates_are_strict_and_say_what_to_write() {
        assert_eq!(parse_day("2024-03-05"), Ok(MAR_5_2024));
        assert!(
            parse_day("2024-3-5")
                .expect_err("refused")
                .contains("YYYY-MM-DD")
        );
        assert!(parse_day("2024-02-30").is_err());
        assert_eq!(parse_us_day("3/5/2024"), Ok(MAR_5_2024));
        assert_eq!(parse_us_day("03/05/2024"), Ok(MAR_5_2024));
        assert!(
            parse_us_day("2024-03-05")
                .expect_err("refused")
                .contains("M/D/YYYY")
        );
        assert_eq!(parse_instant("2024-03-05"), Ok(MAR_5_2024));
        assert_eq!(parse_instant("2024-03-05T00:00:00.000Z"), Ok(MAR_5_2024));
        assert!(
            parse_instant("yesterday")
                .expect_err("refused")
                .contains("ISO 8601")
        );
        assert_eq!(
            parse_period("2024-03-05"),
            Some((MAR_5_2024, MAR_5_2024 + DAY))
        );
        let (start, end) = parse_period("2024").expect("year");
        assert_eq!(
            (day(start), day(end)),
            ("2024-01-01".into(), "2025-01-01".into())
        );
        let (start, end) = parse_period("2024-02").expect("month");
        assert_eq!(
            (day(start), day(end)),
            ("2024-02-01".into(), "2024-03-01".into())
        );
        assert_eq!(parse_period("March"), None);
        assert_eq!(as_of_cutoff("2024-03-05"), Ok(MAR_5_2024 + DAY));
        assert_eq!(as_of_cutoff("2024-03-05T00:00:00Z"), Ok(MAR_5_2024 + 1));
        assert!(as_of_cutoff("last year").is_err());
    }

    #[test]
    fn ranges_are_half_open_and_undated_pages_are_in_none_that_is_bounded() {
        let r = DateRange::between(10, 20);
        assert!(r.keeps(Some(10)) && r.keeps(Some(19)) && !r.keeps(Some(20)));
        assert!(!r.keeps(None));
        assert!(DateRange::default().keeps(None));
        let both = DateRange::since(15)
            .intersect(DateRange::before(30))
            .intersect(r);
        assert_eq!(both, DateRange::between(15, 20));
        assert_eq!(day(months_before(MAR_5_2024, 1)), "2024-02-05");
        assert_eq!(
            day(months_before(
                document_instant("2024-03-31").expect("valid"),
                1
            )),
            "2024-02-29"
        );
    }

    #[test]
    fn periods_count_back_from_the_frozen_clock() {
        let now = MAR_5_2024;
        let week = DateFilter {
            past: Some(Past::Weeks(1)),
            ..DateFilter::default()
        };
        assert_eq!(
            week.resolve(Some(now)),
            DateRange::between(now - 7 * DAY, now + 1)
        );
        assert!(week.resolve(Some(now)).keeps(Some(now)));
        assert!(!week.resolve(None).keeps(Some(now)));
        assert_eq!(
            day(Past::Months(1).before(now).from.expect("valid")),
            "2024-02-05"
        );
        assert_eq!(
            day(Past::Years(2).before(now).from.expect("valid")),
            "2022-03-05"
        );
        assert_eq!(Past::Hours(3).before(now).from, Some(now - 3 * 3600));
        let fixed = DateFilter {
            range: DateRange::since(now - DAY),
            past: Some(Past::Days(3)),
        };
        assert_eq!(
            fixed.resolve(Some(now)),
            DateRange::between(now - DAY, now + 1)
        );
    }

    #[test]
    fn each_api_writes_dates_its_own_way() {
        let t = MAR_5_2024 + 12 * 3600;
        assert_eq!(rfc3339(t), "2024-03-05T12:00:00Z");
        assert_eq!(rfc3339_millis(t), "2024-03-05T12:00:00.000Z");
        assert_eq!(local_iso(t), "2024-03-05T12:00:00");
        assert_eq!(http_date(t), "Tue, 05 Mar 2024 12:00:00 GMT");
        assert_eq!(long_date(t), "March 5, 2024");
        assert_eq!(google_date(t, t + 30 * DAY), "Mar 5, 2024");
        assert_eq!(google_date(t, t + 3 * DAY), "3 days ago");
        assert_eq!(google_date(t, t + DAY), "1 day ago");
        assert_eq!(google_date(t, t + 5 * 3600), "5 hours ago");
        assert_eq!(google_date(t, t), "1 hour ago");
        assert_eq!(
            google_date(t, t - DAY),
            "Mar 5, 2024",
            "newer than the clock"
        );
        assert_eq!(brave_age(t, t + 2 * DAY), "2 days ago");
        assert_eq!(brave_age(t, t + 8 * DAY), "March 5, 2024");
    }
}
