/// snd_pcm_open's failure, as a positive errno.
struct PCMOpenError: Error, Hashable, Sendable {
    let code: Int32
}
