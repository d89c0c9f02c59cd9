import SupervisorCore
import SupervisorKernel
import Synchronization

/// The hand-over document as a file: the signature, the document with the core's records left
/// out, then those records in `recordParts` parts, each an unkeyed container of records, one
/// after another, all in the compact binary form of `BinaryFormat`. The parts are written and
/// read at once, one per CPU (at least `recordsPerPart` records each), the rest of the document
/// (most of it the processes) read at the same time as them; the parts' concatenation is the
/// core's `records`: the document of 1,000 extensions is mostly records.
enum HandoverFile {
    /// The fewest records worth a part (and a thread) of their own.
    static let recordsPerPart = 256
    /// The most parts a reader takes: this many, or one per CPU of its own if it has more.
    static let maximumParts = 64

    /// The results of the jobs of one `concurrently` (the parts, or the head), by job, filled
    /// in by the threads that run them.
    private final class Parts<Value: Sendable>: Sendable {
        let results: Mutex<[Int: Result<Value, any Error>]> = Mutex([:])
    }

    /// `document` as the file's bytes, in parts whose concatenation is the file (written one
    /// after another, never copied into one buffer): the rest of the document, then its record
    /// parts, all encoded concurrently.
    static func encode(_ document: HandoverDocument, kernel: any Kernel) throws -> [[UInt8]] {
        let records = document.core.records
        let count = max(1, min(kernel.processorCount, records.count / recordsPerPart))
        var head = document
        head.core.records = []
        head.recordParts = count
        let written = Parts<[UInt8]>()
        // Job 0 writes the head; job k + 1 writes part k.
        kernel.concurrently(
            [
                { @Sendable [head] in
                    let encoded = Result<[UInt8], any Error> { try BinaryEncoder().encode(head, signature: HandoverDocument.signature) }
                    written.results.withLock { $0[0] = encoded }
                }
            ]
                + (0..<count).map { k in
                    let part = Array(records[(records.count * k / count)..<(records.count * (k + 1) / count)])
                    return { @Sendable in
                        let encoded = Result<[UInt8], any Error> { try BinaryEncoder().encode(records: part) }
                        written.results.withLock { $0[k + 1] = encoded }
                    }
                })
        let results = written.results.withLock { $0 }
        var parts: [[UInt8]] = []
        for k in 0...count {
            guard let part = results[k] else { throw HandoverError.corrupt(k == 0 ? "the head was not written" : "record part \(k - 1) was not written") }
            parts.append(try part.get())
        }
        return parts
    }

    /// The document in `bytes` (a file `encode` wrote), its record parts decoded concurrently.
    /// Throws `Failure` saying whether the bytes are no hand-over document at all, one of
    /// another version, or a corrupt one, naming what is wrong.
    static func decode(_ bytes: [UInt8], kernel: any Kernel) throws(Failure) -> HandoverDocument {
        let decoder = BinaryDecoder()
        let signature = HandoverDocument.signature
        let headEnd: Int
        struct Versioned: Decodable { var version: Int; var daemonVersion: String? }
        let versioned: Versioned
        do {
            guard bytes.starts(with: signature) else {
                throw BinaryDecodingError(problem: "not in the expected form: it does not start with its signature")
            }
            headEnd = try decoder.end(ofContainerIn: bytes, at: signature.count)
            versioned = try decoder.decode(Versioned.self, from: bytes[signature.count..<headEnd])
        } catch {
            throw .notADocument("\(error)")
        }
        guard versioned.version == HandoverDocument.currentVersion else {
            throw .version(found: versioned.version, writer: versioned.daemonVersion)
        }
        do {
            let head = bytes[signature.count..<headEnd]
            // A thread per part: no more than `maximumParts`, or one per CPU if there are more.
            let mostParts = max(maximumParts, kernel.processorCount)
            struct Layout: Decodable { var recordParts: Int }
            guard let parts = (try? decoder.decode(Layout.self, from: head))?.recordParts, (1...mostParts).contains(parts) else {
                // No count of parts to go by: the head read whole says what is wrong.
                let document = try decoder.decode(HandoverDocument.self, from: head)
                throw HandoverError.corrupt("recordParts: \(document.recordParts) part(s) and \(document.core.records.count) record(s) in the head")
            }
            // The head's own faults (records in it, a count of parts it does not agree with, a
            // descriptor named twice) are named first, then the parts' layout, then the parts.
            func checked(_ document: HandoverDocument) throws -> HandoverDocument {
                guard document.core.records.isEmpty, document.recordParts == parts else {
                    throw HandoverError.corrupt("recordParts: \(document.recordParts) part(s) and \(document.core.records.count) record(s) in the head")
                }
                // Each descriptor the document names crosses once, and none is stdin, stdout or
                // stderr: a corrupt document must not make two owners of one descriptor.
                let descriptors = document.descriptors
                guard Set(descriptors).count == descriptors.count, descriptors.allSatisfy({ $0 > 2 }) else {
                    throw HandoverError.corrupt("descriptors: one named twice, or one of 0, 1 and 2 (\(descriptors.sorted()))")
                }
                return document
            }
            var ranges: [Range<Int>] = []
            var offset = headEnd
            var layoutFault: HandoverError?
            for k in 0..<parts {
                do {
                    let end = try decoder.end(ofContainerIn: bytes, at: offset)
                    ranges.append(offset..<end)
                    offset = end
                } catch {
                    layoutFault = .corrupt("record part \(k): \(error.problem)")
                    break
                }
            }
            if layoutFault == nil, offset != bytes.count { layoutFault = .corrupt("\(bytes.count - offset) byte(s) after the last record part") }
            if let layoutFault {
                _ = try checked(try decoder.decode(HandoverDocument.self, from: head))
                throw layoutFault
            }
            // The head (most of it the processes) is read at the same time as the parts.
            let headResult = Parts<HandoverDocument>()
            let results = Parts<[ExtensionRecord]>()
            kernel.concurrently(
                [
                    { @Sendable in
                        let decoded = Result<HandoverDocument, any Error> { try BinaryDecoder().decode(HandoverDocument.self, from: head) }
                        headResult.results.withLock { $0[0] = decoded }
                    }
                ]
                    + ranges.enumerated().map { k, range in
                        let slice = bytes[range]
                        return { @Sendable in
                            let decoded = Result<[ExtensionRecord], any Error> { try BinaryDecoder().decode(records: slice) }
                            results.results.withLock { $0[k] = decoded }
                        }
                    })
            guard let read = try headResult.results.withLock({ $0[0] })?.get() else { throw HandoverError.corrupt("the head was not read") }
            var document = try checked(read)
            let decoded = results.results.withLock { $0 }
            for k in ranges.indices {
                let first = document.core.records.count
                guard let part = decoded[k] else { throw HandoverError.corrupt("record part \(k) was not read") }
                do {
                    document.core.records += try part.get()
                } catch {
                    throw renumbered(error, from: first)
                }
            }
            return document
        } catch {
            throw .corrupt(Supervisor.Snapshot.corrupt(error).description)
        }
    }

    /// `error` of a part whose first record is record `first` of the core, with its path
    /// starting at `core.records[N]`, N counted over every part.
    private static func renumbered(_ error: any Error, from first: Int) -> any Error {
        guard var e = BinaryDecodingError.inside("records", error) as? BinaryDecodingError else { return error }
        if e.path.count > 1, e.path[1].hasPrefix("["), let n = Int(e.path[1].dropFirst().dropLast()) {
            e.path[1] = "[\(n + first)]"
        }
        e.path.insert("core", at: 0)
        return e
    }

    /// Why bytes are not a document this program can take over.
    enum Failure: Error {
        /// Not a hand-over document (no signature, no document after it).
        case notADocument(String)
        /// A document of another version, and the version of the daemon that wrote it.
        case version(found: Int, writer: String?)
        /// A document of this version that cannot be read whole, or whose state is corrupt.
        case corrupt(String)
    }
}
