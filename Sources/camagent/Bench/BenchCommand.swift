import ArgumentParser
import Foundation
import Publisher
import MediaTypes
import PixelConversion

/// `camagent bench conversion`: the per-frame pixel work of the capture path,
/// timed on this machine. Benchmarks/run drives it and sets it beside FFmpeg
/// and GStreamer; see BENCHMARKS.md for what each number means.
struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Time the capture path's pixel work (YUYV→NV12 vs memcpy, MJPEG decode).",
        discussion: """
            Buffers are cycled through a working set larger than the CPU caches, so \
            every frame starts cold, as a frame fresh from the driver's DMA does. \
            Each figure is the median of several rounds. Benchmarks/run runs this \
            together with the capture-path comparison against FFmpeg and GStreamer.
            """
    )

    @Option(help: "Frame size WxH.", transform: { text in
        guard let size = FrameSize(parsing: text), size.width % 2 == 0 else {
            throw ValidationError("size must be WxH with an even width, e.g. 1280x720")
        }
        return size
    })
    var size = FrameSize(width: 1280, height: 720)

    @Option(help: "Frames per round.")
    var frames = 200

    @Option(help: "Rounds; the median is reported.")
    var rounds = 5

    @Option(help: "A JPEG file to time MJPEG decoding with (its size overrides --size for that part).")
    var jpeg: String?

    @Flag(inversion: .prefixedNo, help: "Time YUYV→NV12 against memcpy (off to time only --jpeg or --encode).")
    var conversion = true

    @Option(help: "Time a video encoder alone (vp8 or h264) on --encode-frames test-pattern frames at --size.")
    var encode: EncodeBenchmark.Codec?

    @Option(help: "Frames the encoder is timed on.")
    var encodeFrames = 300

    @Option(help: "Encoder target bitrate in kbit/s.")
    var bitrate = 1500

    @Option(help: "VP8's temporal layers, 1 or 2 (default: publish's, 2).")
    var temporalLayers = PublisherSettings().videoTemporalLayers

    @Flag(help: "Encode each frame at its time (30 a second, as publish does) instead of back to back.")
    var encodePaced = false

    @Flag(help: "Print the results as one JSON object.")
    var json = false

    func validate() throws {
        guard frames > 0, rounds > 0 else { throw ValidationError("--frames and --rounds must be positive") }
        guard (1...2).contains(temporalLayers) else { throw ValidationError("--temporal-layers must be 1 or 2") }
        guard encodeFrames > 0, bitrate > 0 else { throw ValidationError("--encode-frames and --bitrate must be positive") }
    }

    func run() throws {
        var result = conversion ? ConversionBenchmark(size: size, frames: frames, rounds: rounds).run() : BenchResult()
        if let jpeg {
            guard let data = FileManager.default.contents(atPath: jpeg) else {
                printError("camagent: cannot read \(jpeg)")
                throw ExitCode(ExitCodes.usage)
            }
            do {
                result.mjpeg = try MJPEGBenchmark(jpeg: data, frames: frames, rounds: rounds).run()
            } catch {
                printError("camagent: \(jpeg): \(error)")
                throw ExitCode(ExitCodes.usage)
            }
        }
        if let codec = encode {
            do {
                result.encode = try EncodeBenchmark(codec: codec, size: size, frames: encodeFrames, framesPerSecond: 30,
                                                    bitrateKbps: bitrate, temporalLayers: temporalLayers,
                                                    paced: encodePaced).run()
            } catch {
                printError("camagent: \(codec.rawValue) encoder: \(error)")
                throw ExitCode(ExitCodes.driverError)
            }
        }
        print(json ? JSONOutput.line(result) : result.text)
    }
}
