package io.seatlease.client;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Flow;

/**
 * An answer's body, read as it arrives up to a cap: beyond it the rest is refused (the
 * subscription cancelled) and the body is marked too big. {@link #abort} ends the read at
 * once, whatever the server still sends: the caller's deadline, not the server's pace,
 * decides when an exchange ends.
 */
final class CappedBody implements HttpResponse.BodySubscriber<CappedBody.Bytes> {
    /** The body read (null when it was too big). */
    record Bytes(byte[] data, boolean tooBig) {}

    private final int cap;
    private final ByteArrayOutputStream received = new ByteArrayOutputStream();
    private final CompletableFuture<Bytes> result = new CompletableFuture<>();
    private Flow.Subscription subscription;
    private boolean aborted;

    CappedBody(int cap) {
        this.cap = cap;
    }

    @Override
    public void onSubscribe(Flow.Subscription value) {
        synchronized (this) {
            if (aborted) {
                value.cancel();
                return;
            }
            subscription = value;
        }
        value.request(Long.MAX_VALUE); // bounded by the cap: past it the subscription is cancelled
    }

    @Override
    public void onNext(List<ByteBuffer> items) {
        if (result.isDone()) {
            return;
        }
        for (ByteBuffer item : items) {
            byte[] chunk = new byte[item.remaining()];
            item.get(chunk);
            received.write(chunk, 0, chunk.length);
        }
        if (received.size() > cap) {
            cancelSubscription();
            result.complete(new Bytes(null, true));
        }
    }

    @Override
    public void onError(Throwable failure) {
        result.completeExceptionally(failure);
    }

    @Override
    public void onComplete() {
        result.complete(new Bytes(received.toByteArray(), false));
    }

    @Override
    public CompletionStage<Bytes> getBody() {
        return result;
    }

    /** Stops reading now (the connection is closed, not reused). */
    void abort() {
        synchronized (this) {
            aborted = true;
        }
        cancelSubscription();
        result.completeExceptionally(new IOException("aborted"));
    }

    private void cancelSubscription() {
        Flow.Subscription current;
        synchronized (this) {
            current = subscription;
        }
        if (current != null) {
            current.cancel();
        }
    }
}
