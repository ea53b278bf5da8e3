//! Tab completion for the interactive shell: the command name at the start of a line, a
//! table name inside the quotes of an argument.
//!
//! Invariant: the candidates all start with the word being completed, and the returned
//! start is a char boundary of the line at or before the cursor.

use super::COMMANDS;

/// Candidates for the word that ends at byte `pos` of `line`: returns where the word
/// starts and the candidates that replace it. Command names complete at the start of a
/// line (followed by a space); inside quotes, `tables` complete (followed by the quote).
pub fn complete(line: &str, pos: usize, tables: &[String]) -> (usize, Vec<String>) {
    let pos = (0..=pos.min(line.len()))
        .rev()
        .find(|p| line.is_char_boundary(*p))
        .unwrap_or(0);
    let head = &line[..pos];
    let start = head
        .rfind(|c: char| c.is_whitespace() || "'\",[{".contains(c))
        .map(|i| i + 1)
        .unwrap_or(0);
    let word = &head[start..];
    let before = &head[..start];
    if before.trim().is_empty() {
        let mut names: Vec<String> = COMMANDS
            .iter()
            .map(|(_, n, _)| *n)
            .filter(|n| n.starts_with(word))
            .map(|n| format!("{n} "))
            .collect();
        names.sort();
        names.dedup();
        return (start, names);
    }
    match before.chars().last() {
        Some(q @ ('\'' | '"')) => {
            let mut names: Vec<String> = tables
                .iter()
                .filter(|t| t.starts_with(word))
                .map(|t| format!("{t}{q}"))
                .collect();
            names.sort();
            (start, names)
        }
        _ => (start, Vec::new()),
    }
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
                    "list_regions ".into()
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
}
