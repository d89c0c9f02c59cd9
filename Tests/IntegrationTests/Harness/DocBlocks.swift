import Foundation

/// A fenced code block of a Markdown document, with the marker comment on the line before it
/// (`<!-- runnable -->`, `<!-- example -->`…), if any.
struct DocBlock: CustomStringConvertible {
    var file: String
    /// The 1-based line of the opening fence.
    var line: Int
    /// The fence's language (`json`, `console`, or empty).
    var language: String
    /// The marker's text (`runnable`, `example`, `invalid-example`), or nil without one.
    var marker: String?
    var lines: [String]

    var text: String { lines.map { $0 + "\n" }.joined() }
    var description: String { "\((file as NSString).lastPathComponent):\(line)" }

    /// Every fenced block of the Markdown file at `path`.
    static func all(in path: String) throws -> [DocBlock] {
        let lines = try String(contentsOfFile: path, encoding: .utf8).components(separatedBy: "\n")
        var blocks: [DocBlock] = []
        var i = 0
        while i < lines.count {
            let fence = lines[i].trimmingCharacters(in: .whitespaces)
            guard fence.hasPrefix("```") else { i += 1; continue }
            var marker: String?
            if i > 0 {
                let previous = lines[i - 1].trimmingCharacters(in: .whitespaces)
                if previous.hasPrefix("<!--") && previous.hasSuffix("-->") {
                    marker = previous.dropFirst(4).dropLast(3).trimmingCharacters(in: .whitespaces)
                }
            }
            var body: [String] = []
            var j = i + 1
            while j < lines.count && !lines[j].trimmingCharacters(in: .whitespaces).hasPrefix("```") {
                body.append(lines[j])
                j += 1
            }
            blocks.append(DocBlock(file: path, line: i + 1, language: String(fence.dropFirst(3)), marker: marker, lines: body))
            i = j + 1
        }
        return blocks
    }
}
