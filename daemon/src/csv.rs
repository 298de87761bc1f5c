//! The one CSV writer behind every `summary.csv` (a run's and `collect`'s): RFC 4180, so a
//! machine or workload name with a comma, a quote or a line break stays one field; and a
//! field a spreadsheet would take for a formula is written as text.

/// Builds a CSV document record by record.
#[derive(Debug, Default)]
pub(crate) struct CsvWriter {
    out: String,
}

impl CsvWriter {
    /// A document whose first record is `header`.
    pub(crate) fn with_header(header: &[&str]) -> Self {
        let mut w = CsvWriter::default();
        w.record(header);
        w
    }

    /// Appends one record; fields are quoted where RFC 4180 requires it, records end in CRLF.
    pub(crate) fn record<S: AsRef<str>>(&mut self, fields: &[S]) {
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            push_field(&mut self.out, f.as_ref());
        }
        self.out.push_str("\r\n");
    }

    pub(crate) fn finish(self) -> String {
        self.out
    }
}

/// A field a spreadsheet would execute: one starting with `=`, `+`, `-` or `@` (or a tab or
/// carriage return before one), unless it is a plain number such as `-1.5` or `+2e3`.
fn is_formula(field: &str) -> bool {
    let plain_number = field
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        && field.parse::<f64>().is_ok_and(f64::is_finite);
    field.starts_with(['=', '+', '-', '@', '\t', '\r']) && !plain_number
}

fn push_field(out: &mut String, field: &str) {
    // A single quote in front makes the cell text (OWASP's advice for CSV injection).
    let neutralised;
    let field = if is_formula(field) {
        neutralised = format!("'{field}");
        neutralised.as_str()
    } else {
        field
    };
    if field.contains([',', '"', '\r', '\n']) {
        out.push('"');
        out.push_str(&field.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(field);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader of RFC 4180 written from the RFC's grammar, to round-trip what the writer wrote.
    fn read(text: &str) -> Vec<Vec<String>> {
        let mut records = Vec::new();
        let mut record = Vec::new();
        let mut field = String::new();
        let mut chars = text.chars().peekable();
        let mut quoted = false;
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                (true, '"') => quoted = false,
                (true, c) => field.push(c),
                (false, '"') if field.is_empty() => quoted = true,
                (false, ',') => record.push(std::mem::take(&mut field)),
                (false, '\r') if chars.peek() == Some(&'\n') => {
                    chars.next();
                    record.push(std::mem::take(&mut field));
                    records.push(std::mem::take(&mut record));
                }
                (false, c) => field.push(c),
            }
        }
        records
    }

    #[test]
    fn awkward_fields_round_trip() {
        let awkward = [
            "plain",
            "comma, inside",
            "a \"quoted\" word",
            "two\nlines",
            "carriage\rreturn",
            "crlf\r\nend",
            "",
            "\"",
            " spaced ",
        ];
        let mut w = CsvWriter::with_header(&["n", "field"]);
        for (n, f) in awkward.iter().enumerate() {
            w.record(&[n.to_string().as_str(), f]);
        }
        let text = w.finish();
        let back = read(&text);
        assert_eq!(back.len(), awkward.len() + 1, "{text:?}");
        assert_eq!(back[0], ["n", "field"]);
        for (n, f) in awkward.iter().enumerate() {
            assert_eq!(back[n + 1], [n.to_string(), f.to_string()], "{text:?}");
        }
        assert!(text.starts_with("n,field\r\n0,plain\r\n1,\"comma, inside\"\r\n"));
    }

    #[test]
    fn fields_a_spreadsheet_would_execute_are_written_as_text() {
        let mut w = CsvWriter::default();
        w.record(&[
            "=cmd|' /C calc'!A0",
            "+SUM(A1)",
            "-2+3",
            "@SUM(A1)",
            "\t=1",
            "-1.5",
            "+2e3",
            "-inf",
            "plain=1",
        ]);
        let back = read(&w.finish());
        assert_eq!(
            back,
            [[
                "'=cmd|' /C calc'!A0",
                "'+SUM(A1)",
                "'-2+3",
                "'@SUM(A1)",
                "'\t=1",
                "-1.5",
                "+2e3",
                "'-inf",
                "plain=1",
            ]]
        );
    }
}
