//! Tab completion for the interactive shell: the command name at the start of a line, a
//! table name inside the quotes of an argument.
//!
//! Invariant: the candidates all start with the word being completed, and the returned
//! start is a char boundary of the line at or before the cursor.

use super::COMMANDS;

/// Candidates for the word that ends at byte `pos` of `line`: returns where the word
/// starts and the candidates that replace it. Command names complete at the start of a
/// line (followed by a space); inside an open quote, `tables` complete (followed by the
/// quote that closes it). After a closed quote nothing completes.
pub fn complete(line: &str, pos: usize, tables: &[String]) -> (usize, Vec<String>) {
    let pos = (0..=pos.min(line.len()))
        .rev()
        .find(|p| line.is_char_boundary(*p))
        .unwrap_or(0);
    let head = &line[..pos];
    if let Some((quote, start)) = open_quote(head) {
        let word = &head[start..];
        let mut names: Vec<String> = tables
            .iter()
            .filter(|t| t.starts_with(word))
            .map(|t| format!("{t}{quote}"))
            .collect();
        names.sort();
        return (start, names);
    }
    let start = head
        .rfind(|c: char| c.is_whitespace() || "'\",[{".contains(c))
        .map(|i| i + 1)
        .unwrap_or(0);
    let word = &head[start..];
    if !head[..start].trim().is_empty() {
        return (start, Vec::new());
    }
    let mut names: Vec<String> = COMMANDS
        .iter()
        .map(|(_, n, _)| *n)
        .filter(|n| n.starts_with(word))
        .map(|n| format!("{n} "))
        .collect();
    names.sort();
    names.dedup();
    (start, names)
}

/// The quote left open at the end of `head` and the byte where its text starts, or `None`
/// when every quote is closed. Inside a quote a backslash escapes the next character, as
/// in the shell's strings.
fn open_quote(head: &str) -> Option<(char, usize)> {
    let mut open: Option<(char, usize)> = None;
    let mut escaped = false;
    for (i, c) in head.char_indices() {
        match open {
            None if c == '\'' || c == '"' => open = Some((c, i + c.len_utf8())),
            None => {}
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some((q, _)) if c == q => open = None,
            Some(_) => {}
        }
    }
    open
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_tables() {
        let tables = vec![
            "testtable".to_string(),
            "users".to_string(),
            "im:messages".into(),
        ];
        assert_eq!(
            complete("lis", 3, &tables),
            (
                0,
                vec![
                    "list ".into(),
                    "list_coprocessors ".into(),
                    "list_indexes ".into(),
                    "list_namespace ".into(),
                    "list_namespace_tables ".into(),
                    "list_plugins ".into(),
                    "list_regions ".into(),
                    "list_snapshots ".into()
                ]
            )
        );
        assert_eq!(
            complete("scan 'te", 8, &tables),
            (6, vec!["testtable'".into()])
        );
        assert_eq!(complete("get \"u", 6, &tables), (5, vec!["users\"".into()]));
        assert_eq!(
            complete("get 't', 'r', VER", 17, &tables).1,
            Vec::<String>::new()
        );
        assert_eq!(complete("", 0, &tables).1.len(), COMMANDS.len());
        assert_eq!(complete("get 'é", 5, &tables).0, 5);
    }

    #[test]
    fn only_an_open_quote_completes_tables() {
        let tables = vec!["messages".to_string(), "users".to_string()];
        // After the closing quote (or a quoted argument and more), no table name is offered.
        assert_eq!(complete("put 'messages'", 14, &tables), (14, Vec::new()));
        assert_eq!(complete("put 'messages', '", 17, &tables).0, 17);
        assert_eq!(
            complete("put 'messages', 'r1', 'f:q', 'us", 32, &tables),
            (30, vec!["users'".to_string()])
        );
        // An escaped quote does not close the string; a quote of the other kind is text.
        assert_eq!(
            complete("get 'it\\'s", 10, &tables),
            (5, Vec::<String>::new())
        );
        assert_eq!(complete("get \"m'", 7, &tables), (5, Vec::<String>::new()));
        assert_eq!(
            complete("get \"m", 6, &tables),
            (5, vec!["messages\"".to_string()])
        );
        // The cursor inside the line: only the text before it counts.
        assert_eq!(
            complete("scan 'mes', 'x'", 9, &tables),
            (6, vec!["messages'".to_string()])
        );
        assert_eq!(
            complete("sc 'messages'", 2, &tables).1,
            vec!["scan ".to_string(), "scan_index ".to_string()]
        );
    }
}
