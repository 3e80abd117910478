//! Text for people on a terminal: tables whose every line fits [`WIDTH`] columns, prose wrapped
//! to it, numbered notes that say a repeated text once, and warnings said once with a count.
//! Pure: the commands print what these build. Widths count characters (`µ`, `×`, `✓` are one
//! column each), never bytes.

use std::fmt::Write as _;

/// Columns of the terminal every line is written for.
pub const WIDTH: usize = 120;

/// The header of the shape column in every table of cases (`Shape`'s display).
pub const SHAPE_HEADER: &str = "shape\nB,H,Sq,D[,Hkv,Sk]";

/// Spaces between columns: two where the table fits with them, else one.
const WIDE_GAP: usize = 2;
const NARROW_GAP: usize = 1;
/// The narrowest a wrapped column is made before every column is narrowed.
const MIN_WRAPPED: usize = 8;

/// Characters of `text` (its columns on a terminal, for the text this tool writes).
pub fn width(text: &str) -> usize {
    text.chars().count()
}

/// `text` in lines of at most `width` columns, broken at spaces (a word longer than a line is
/// cut after its last comma that fits, else where the line ends); the first line starts with
/// `first`, the others with `rest`. Never empty.
pub fn wrap(text: &str, width: usize, first: &str, rest: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = first.to_string();
    let mut empty = true;
    let prefix_of = |lines: &Vec<String>| if lines.is_empty() { first } else { rest };
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let room = width.saturating_sub(self::width(&line));
        let needed = self::width(word) + usize::from(!empty);
        if !empty && needed > room {
            lines.push(std::mem::take(&mut line));
            line = rest.to_string();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        // A word wider than a whole line is cut where the line ends.
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let room = width.saturating_sub(self::width(&line)).max(1);
            if word.len() <= room {
                line.extend(word);
                break;
            }
            // After the last comma that fits (a `--config` text), else where the line ends.
            let cut = word[..room].iter().rposition(|&c| c == ',').map_or(room, |i| i + 1);
            let tail = word.split_off(cut);
            line.extend(word);
            lines.push(std::mem::take(&mut line));
            line = prefix_of(&lines).to_string();
            word = tail;
        }
        empty = false;
    }
    if !empty || lines.is_empty() {
        lines.push(line);
    }
    lines.into_iter().map(|l| l.trim_end().to_string()).collect()
}

/// `text` wrapped to [`WIDTH`], later lines indented by two spaces, as one string of lines.
pub fn paragraph(text: &str) -> String {
    wrap(text, WIDTH, "", "  ").into_iter().map(|l| l + "\n").collect()
}

/// One line of a `label:   value` listing wrapped to [`WIDTH`], later lines indented to where
/// its value starts (after the first run of two or more spaces past its first word; else two
/// past its own indent), as one string of lines.
pub fn hanging(line: &str) -> String {
    let indent = line.len() - line.trim_start().len();
    let value = line[indent..]
        .find("  ")
        .map(|gap| indent + gap + line[indent + gap..].len() - line[indent + gap..].trim_start().len());
    let hang = value.map_or(indent + 2, |v| line[..v].chars().count());
    let (first, rest) = line.split_at(value.unwrap_or(indent));
    wrap(rest, WIDTH, first, &" ".repeat(hang)).into_iter().map(|l| l + "\n").collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// One column of a [`Table`]: its header (lines separated by `\n`, the last one next to the
/// rows), how its cells align, and whether it is the one to narrow (wrapping its cells) when
/// the table is wider than [`WIDTH`].
#[derive(Clone, Debug)]
pub struct Column {
    header: String,
    align: Align,
    wraps: bool,
    optional: bool,
}

impl Column {
    pub fn left(header: &str) -> Self {
        Column { header: header.to_string(), align: Align::Left, wraps: false, optional: false }
    }

    pub fn right(header: &str) -> Self {
        Column { align: Align::Right, ..Column::left(header) }
    }

    /// Narrowed first, its cells wrapped at spaces, when the table is too wide.
    pub fn wraps(self) -> Self {
        Column { wraps: true, ..self }
    }

    /// Left out when every cell of it is empty.
    pub fn optional(self) -> Self {
        Column { optional: true, ..self }
    }

    fn header_lines(&self) -> Vec<&str> {
        self.header.split('\n').collect()
    }
}

/// A row of a table: cells, or a line of text under the row before (`-v`'s kernel names),
/// indented and wrapped to the whole width.
#[derive(Clone, Debug)]
enum Row {
    Cells(Vec<String>),
    Line(String),
}

/// A table of columns two (or one) spaces apart, every line within [`WIDTH`] columns.
#[derive(Clone, Debug)]
pub struct Table {
    columns: Vec<Column>,
    rows: Vec<Row>,
}

impl Table {
    pub fn new(columns: Vec<Column>) -> Self {
        Table { columns, rows: Vec::new() }
    }

    /// Adds a row, one cell per column.
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.columns.len(), "one cell per column");
        self.rows.push(Row::Cells(cells));
    }

    /// Adds a line of text under the last row, indented by four spaces.
    pub fn line(&mut self, text: String) {
        self.rows.push(Row::Line(text));
    }

    fn cell_rows(&self) -> impl Iterator<Item = &Vec<String>> {
        self.rows.iter().filter_map(|r| match r {
            Row::Cells(cells) => Some(cells),
            Row::Line(_) => None,
        })
    }

    /// The columns that are shown: every one but an optional column with no text.
    fn shown(&self) -> Vec<usize> {
        (0..self.columns.len())
            .filter(|&i| !self.columns[i].optional || self.cell_rows().any(|r| !r[i].is_empty()))
            .collect()
    }

    /// Whether the table fits [`WIDTH`] with one space between columns and its wrapped columns
    /// at most [`MIN_WRAPPED`] wide, no other cell wrapped.
    pub fn fits(&self) -> bool {
        let shown = self.shown();
        let widths = self.natural(&shown);
        let width: usize =
            shown.iter().zip(&widths).map(|(&i, &w)| if self.columns[i].wraps { w.min(MIN_WRAPPED) } else { w }).sum();
        width + NARROW_GAP * shown.len().saturating_sub(1) <= WIDTH
    }

    fn natural(&self, shown: &[usize]) -> Vec<usize> {
        shown
            .iter()
            .map(|&i| {
                let header = self.columns[i].header_lines().into_iter().map(width).max().unwrap_or(0);
                self.cell_rows().map(|r| width(&r[i])).max().unwrap_or(0).max(header)
            })
            .collect()
    }

    /// The table's layout: which columns, how wide, how far apart.
    pub fn layout(&self) -> Layout {
        let shown = self.shown();
        let columns: Vec<Column> = shown.iter().map(|&i| self.columns[i].clone()).collect();
        Layout::fit(columns, self.natural(&shown), shown)
    }

    /// The header and every row, each line ending in a newline.
    pub fn render(&self) -> String {
        let layout = self.layout();
        let mut out = String::new();
        for line in layout.header() {
            out.push_str(&line);
            out.push('\n');
        }
        for row in &self.rows {
            let lines = match row {
                Row::Cells(cells) => layout.row(cells),
                Row::Line(text) => wrap(text, WIDTH, "    ", "      "),
            };
            for line in lines {
                out.push_str(&line);
                out.push('\n');
            }
        }
        out
    }
}

/// Where a table's columns go: computed once, from every row ([`Table::layout`]) or, for a
/// table printed row by row, from the rows known beforehand ([`Layout::fit`]); a cell wider than
/// its column is wrapped onto more lines, so no line passes [`WIDTH`].
#[derive(Clone, Debug)]
pub struct Layout {
    columns: Vec<Column>,
    widths: Vec<usize>,
    /// Indices of the shown columns among the table's (cells are given for every column).
    shown: Vec<usize>,
    gap: usize,
}

impl Layout {
    /// Columns as wide as `natural` (per shown column), with two spaces between them; one space
    /// when that is too wide; then the wrapped columns narrowed (down to [`MIN_WRAPPED`]), then
    /// every column, until the table fits [`WIDTH`].
    fn fit(columns: Vec<Column>, natural: Vec<usize>, shown: Vec<usize>) -> Layout {
        let gaps = columns.len().saturating_sub(1);
        let total = |widths: &[usize], gap: usize| widths.iter().sum::<usize>() + gap * gaps;
        let gap = if total(&natural, WIDE_GAP) <= WIDTH { WIDE_GAP } else { NARROW_GAP };
        let mut widths = natural;
        for (pass, floor) in [(true, MIN_WRAPPED), (false, 1)] {
            while total(&widths, gap) > WIDTH {
                // The widest column that may still narrow in this pass.
                let Some(i) = (0..widths.len())
                    .filter(|&i| (columns[i].wraps || !pass) && widths[i] > floor)
                    .max_by_key(|&i| widths[i])
                else {
                    break;
                };
                let over = total(&widths, gap) - WIDTH;
                widths[i] = widths[i].saturating_sub(over).max(floor);
            }
        }
        Layout { columns, widths, shown, gap }
    }

    /// The layout of a table printed row by row: `columns` sized to fit the rows known now
    /// (`rows`, one cell per column; later rows wrap where they are wider).
    pub fn for_rows(columns: Vec<Column>, rows: &[Vec<String>]) -> Layout {
        let mut table = Table::new(columns);
        for row in rows {
            table.row(row.clone());
        }
        table.layout()
    }

    /// One line per header line, bottom-aligned.
    pub fn header(&self) -> Vec<String> {
        let height = self.columns.iter().map(|c| c.header_lines().len()).max().unwrap_or(0);
        let mut cells: Vec<Vec<String>> = Vec::new();
        for (column, &w) in self.columns.iter().zip(&self.widths) {
            let lines: Vec<String> = column.header_lines().into_iter().flat_map(|l| wrap(l, w, "", "")).collect();
            let mut padded = vec![String::new(); height.saturating_sub(lines.len())];
            padded.extend(lines);
            cells.push(padded);
        }
        let rows = cells.iter().map(Vec::len).max().unwrap_or(0);
        self.lines(&cells, rows)
    }

    /// The lines of one row (`cells`: one per column of the table, shown or not): one, or more
    /// where a cell wraps.
    pub fn row(&self, cells: &[String]) -> Vec<String> {
        let wrapped: Vec<Vec<String>> =
            self.shown.iter().zip(&self.widths).map(|(&i, &w)| wrap(&cells[i], w, "", "")).collect();
        let height = wrapped.iter().map(Vec::len).max().unwrap_or(1);
        self.lines(&wrapped, height)
    }

    /// `height` lines of the shown columns' wrapped `cells` side by side, each padded to its
    /// column (a column with fewer lines is blank below them).
    fn lines(&self, cells: &[Vec<String>], height: usize) -> Vec<String> {
        (0..height)
            .map(|line| {
                let parts: Vec<String> = cells
                    .iter()
                    .zip(&self.columns)
                    .zip(&self.widths)
                    .map(|((c, column), &w)| pad(c.get(line).map_or("", String::as_str), w, column.align))
                    .collect();
                parts.join(&" ".repeat(self.gap)).trim_end().to_string()
            })
            .collect()
    }
}

fn pad(text: &str, width: usize, align: Align) -> String {
    match align {
        Align::Left => format!("{text:<width$}"),
        Align::Right => format!("{text:>width$}"),
    }
}

/// Numbered notes under a table: a row refers to a note by its number, and rows with the same
/// text share one note, so a reason common to many rows is written once.
#[derive(Clone, Debug, Default)]
pub struct Notes {
    texts: Vec<String>,
}

impl Notes {
    /// The number of the note saying `text`, added if new.
    pub fn refer(&mut self, text: &str) -> usize {
        match self.texts.iter().position(|t| t == text) {
            Some(i) => i + 1,
            None => {
                self.texts.push(text.to_string());
                self.texts.len()
            }
        }
    }

    /// The numbers of `texts`' notes as a cell: `1, 3`.
    pub fn refer_all(&mut self, texts: &[String]) -> String {
        let numbers: Vec<String> = texts.iter().map(|t| self.refer(t).to_string()).collect();
        numbers.join(", ")
    }

    /// `heading` and the notes, each wrapped under its number; nothing when there are none.
    pub fn render(&self, heading: &str) -> String {
        if self.texts.is_empty() {
            return String::new();
        }
        let mut out = format!("{heading}\n");
        let digits = self.texts.len().to_string().len();
        for (i, text) in self.texts.iter().enumerate() {
            let first = format!("  {:>digits$}  ", i + 1);
            let rest = " ".repeat(width(&first));
            for line in wrap(text, WIDTH, &first, &rest) {
                let _ = writeln!(out, "{line}");
            }
        }
        out
    }
}

/// Messages said once: the first time a text comes it is to be said, and every later time it
/// is counted instead, for a closing `(same for N more ...)`.
#[derive(Clone, Debug, Default)]
pub struct Repeats {
    seen: Vec<(String, usize)>,
}

impl Repeats {
    /// True the first time `text` comes (say it), false after (counted).
    pub fn first(&mut self, text: &str) -> bool {
        match self.seen.iter_mut().find(|(t, _)| t == text) {
            Some((_, n)) => {
                *n += 1;
                false
            }
            None => {
                self.seen.push((text.to_string(), 0));
                true
            }
        }
    }

    /// Each repeated text's count, in order of first coming: `(text, more)`.
    pub fn repeated(&self) -> impl Iterator<Item = (&str, usize)> {
        self.seen.iter().filter(|(_, n)| *n > 0).map(|(t, n)| (t.as_str(), *n))
    }
}

/// `1 case` or `2 cases`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_breaks_at_spaces_and_cuts_long_words() {
        assert_eq!(wrap("aaa bbb ccc", 7, "", ""), ["aaa bbb", "ccc"]);
        assert_eq!(wrap("aaa bbb ccc", 9, "> ", "  "), ["> aaa bbb", "  ccc"]);
        assert_eq!(wrap("abcdefghij", 4, "", ""), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("", 10, "x ", ""), ["x"]);
        for line in wrap(&"µ× ".repeat(100), 20, "", "  ") {
            assert!(width(&line) <= 20, "{line}");
        }
    }

    #[test]
    fn hanging_lines_continue_under_their_value() {
        let long = format!("GPU:        {}", "word ".repeat(30));
        let text = hanging(&long);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.len() == 2 && lines[1].starts_with("            word"), "{text}");
        let config = format!("             default on sm_90a, D=64: {}", "lever=1,".repeat(20));
        let text = hanging(&config);
        assert!(text.lines().skip(1).all(|l| l.starts_with("               lever=1,")), "{text}");
        assert!(text.lines().all(|l| width(l) <= WIDTH), "{text}");
        assert_eq!(hanging("short: line"), "short: line\n");
    }

    #[test]
    fn a_table_fits_by_narrowing_its_gap_then_its_wrapped_column() {
        let mut t = Table::new(vec![Column::left("name"), Column::left("about").wraps(), Column::right("n\nµs")]);
        t.row(vec!["one".into(), "short".into(), "1.5".into()]);
        assert_eq!(t.render(), "               n\nname  about   µs\none   short  1.5\n");
        t.row(vec!["two".into(), "word ".repeat(40), "22.25".into()]);
        let text = t.render();
        assert!(text.lines().all(|l| width(l) <= WIDTH), "{text}");
        assert!(text.lines().count() > 4, "the long cell wraps: {text}");
        // The numbers stay right-aligned on the row's first line.
        let row = text.lines().find(|l| l.starts_with("two")).unwrap();
        assert!(row.ends_with("22.25"), "{row}");
    }

    #[test]
    fn an_empty_optional_column_is_left_out() {
        let mut t = Table::new(vec![Column::left("a"), Column::left("notes").optional()]);
        t.row(vec!["x".into(), String::new()]);
        assert_eq!(t.render(), "a\nx\n");
        t.row(vec!["y".into(), "1".into()]);
        assert_eq!(t.render(), "a  notes\nx\ny  1\n");
    }

    #[test]
    fn notes_share_numbers_and_repeats_count() {
        let mut notes = Notes::default();
        assert_eq!(notes.refer("slow"), 1);
        assert_eq!(notes.refer_all(&["wrong".into(), "slow".into()]), "2, 1");
        assert_eq!(notes.render("notes:"), "notes:\n  1  slow\n  2  wrong\n");
        let mut said = Repeats::default();
        assert!(said.first("no torch"));
        assert!(!said.first("no torch") && !said.first("no torch"));
        assert!(said.first("other"));
        assert_eq!(said.repeated().collect::<Vec<_>>(), [("no torch", 2)]);
    }
}
