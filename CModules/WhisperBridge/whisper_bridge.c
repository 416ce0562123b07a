// camagent's bridge to whisper.cpp: a flat C API of a few calls that camagent
// loads at run time (dlopen), so the agent builds and runs without the
// speech engine and only captions need it.
//
// Not a SwiftPM target: scripts/install-captions compiles it against the
// whisper.h it installs, into $PREFIX/lib/libcamagent-whisper.so. whisper's
// own structs (whisper_full_params changes between versions) stay on this
// side; camagent sees only the calls below (Sources/Captions/Engine/
// WhisperRecognizer.swift declares the same signatures).
//
//   int   cw_bridge_version(void)            -> 4 (the ABI of this file)
//   void *cw_open(model, threads, err, errlen) -> engine, or NULL and a reason in err
//   int   cw_transcribe(engine, samples, count, audio_ctx, beam_size, should_stop, stop_context,
//                       text, textlen)
//         -> bytes of UTF-8 text written (NUL-terminated), or -1 and a reason in text, or
//         -2 when should_stop(stop_context) said stop (it may be NULL); whisper asks it after
//         the encoder and after each decoded token. beam_size 0 or 1 decodes greedily
//   void  cw_close(engine)
//
// Silero voice activity detection (whisper.cpp's ggml port), streamed: the
// model's recurrent state carries from one window to the next.
//   void *cw_vad_open(model, threads, err, errlen) -> detector, or NULL and a reason in err
//   int   cw_vad_window(void)                -> samples per window at 16 kHz (512)
//   int   cw_vad_probability(detector, samples, count, probability)
//         -> 0 and the speech probability of the last window of `samples`
//         (count: a multiple of cw_vad_window()), or -1
//   void  cw_vad_close(detector)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <whisper.h>

struct cw_engine {
    struct whisper_context *context;
    struct whisper_full_params greedy;
    struct whisper_full_params beam;
};

// whisper and ggml print progress and model details on stderr; the agent has
// its own log, so they stay quiet.
static void cw_quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)level; (void)text; (void)user;
}

int cw_bridge_version(void) { return 4; }

void *cw_open(const char *model, int threads, char *error, size_t error_size) {
    whisper_log_set(cw_quiet, NULL);
    struct whisper_context_params context_params = whisper_context_default_params();
    context_params.use_gpu = false;
    struct whisper_context *context = whisper_init_from_file_with_params(model, context_params);
    if (context == NULL) {
        snprintf(error, error_size, "whisper could not load the model %s", model);
        return NULL;
    }
    struct cw_engine *engine = calloc(1, sizeof *engine);
    if (engine == NULL) {
        whisper_free(context);
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    engine->context = context;
    // One short utterance at a time: no text carried over (each utterance stands
    // alone), one segment, no timestamps, no fallback to higher temperatures (a live
    // caption cannot wait for retries). Greedy for partials; a beam for finals, which
    // hears more words right for a little more CPU.
    for (int strategy = 0; strategy < 2; strategy++) {
        struct whisper_full_params p = whisper_full_default_params(
            strategy == 0 ? WHISPER_SAMPLING_GREEDY : WHISPER_SAMPLING_BEAM_SEARCH);
        p.n_threads = threads > 0 ? threads : 1;
        p.no_context = true;
        p.single_segment = true;
        p.no_timestamps = true;
        p.print_special = false;
        p.print_progress = false;
        p.print_realtime = false;
        p.print_timestamps = false;
        p.suppress_blank = true;
        p.temperature_inc = 0.0f;
        p.greedy.best_of = 1;
        p.language = "en";
        if (strategy == 0) engine->greedy = p; else engine->beam = p;
    }
    return engine;
}

// The caller's stop question, in whisper's abort callback's shape.
struct cw_stop {
    int (*should_stop)(void *);
    void *context;
};

static bool cw_should_stop(void *opaque) {
    struct cw_stop *stop = opaque;
    return stop->should_stop(stop->context) != 0;
}

int cw_transcribe(void *opaque, const float *samples, int count, int audio_ctx, int beam_size,
                  int (*should_stop)(void *), void *stop_context, char *text, size_t text_size) {
    struct cw_engine *engine = opaque;
    if (text_size == 0) return -1;
    text[0] = 0;
    struct whisper_full_params p = beam_size > 1 ? engine->beam : engine->greedy;
    if (beam_size > 1) p.beam_search.beam_size = beam_size;
    struct cw_stop stop = { should_stop, stop_context };
    if (should_stop != NULL) {
        p.abort_callback = cw_should_stop;
        p.abort_callback_user_data = &stop;
    }
    p.audio_ctx = audio_ctx;
    // Speech is at most ~4 words (~6 tokens) a second: a cap of 16 + 8 per second stops a
    // repetition loop (tiny models fall into them on short audio) within a few tokens of
    // the real text, instead of at the context's end (seen: 900 characters, 30 s of CPU).
    p.max_tokens = 16 + count / 2000;
    if (whisper_full(engine->context, p, samples, count) != 0) {
        if (should_stop != NULL && should_stop(stop_context)) {
            snprintf(text, text_size, "stopped");
            return -2;
        }
        snprintf(text, text_size, "whisper_full failed on %d samples", count);
        return -1;
    }
    size_t used = 0;
    int segments = whisper_full_n_segments(engine->context);
    for (int i = 0; i < segments; i++) {
        const char *segment = whisper_full_get_segment_text(engine->context, i);
        size_t length = segment ? strlen(segment) : 0;
        if (used + length + 1 > text_size) length = text_size - used - 1;
        memcpy(text + used, segment, length);
        used += length;
        text[used] = 0;
        if (used + 1 >= text_size) break;
    }
    return (int)used;
}

void cw_close(void *opaque) {
    struct cw_engine *engine = opaque;
    if (engine == NULL) return;
    whisper_free(engine->context);
    free(engine);
}

// Silero's window at 16 kHz: the ggml port takes 512 samples per step (32 ms);
// whisper.h does not say it, the model and its port fix it.
enum { CW_VAD_WINDOW = 512 };

int cw_vad_window(void) { return CW_VAD_WINDOW; }

void *cw_vad_open(const char *model, int threads, char *error, size_t error_size) {
    whisper_log_set(cw_quiet, NULL);
    struct whisper_vad_context_params params = whisper_vad_default_context_params();
    params.n_threads = threads > 0 ? threads : 1;
    params.use_gpu = false;
    struct whisper_vad_context *vad = whisper_vad_init_from_file_with_params(model, params);
    if (vad == NULL) {
        snprintf(error, error_size, "whisper could not load the voice activity model %s", model);
        return NULL;
    }
    // A new context's recurrent state is whatever its buffer held (seen: every window of
    // speech then scored the same 0.35); only the reset clears it.
    whisper_vad_reset_state(vad);
    return vad;
}

int cw_vad_probability(void *opaque, const float *samples, int count, float *probability) {
    if (opaque == NULL || count <= 0 || count % CW_VAD_WINDOW != 0) return -1;
    // _no_reset: a stream's windows come one call at a time, and Silero judges each
    // with what it kept of the ones before.
    if (!whisper_vad_detect_speech_no_reset(opaque, samples, count)) return -1;
    int n = whisper_vad_n_probs(opaque);
    if (n <= 0) return -1;
    *probability = whisper_vad_probs(opaque)[n - 1];
    return 0;
}

void cw_vad_close(void *opaque) {
    if (opaque != NULL) whisper_vad_free(opaque);
}
