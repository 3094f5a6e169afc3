package io.seatlease.client;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Function;

/**
 * A raw HTTP/1.1 server on a loopback port for the tests that need to see the bytes a
 * client sends (its request line and headers) or to send an answer at a pace of their own
 * (headers at once, then the body a byte at a time). One connection per request
 * ("Connection: close").
 */
final class ScriptedServer implements AutoCloseable {
    /** A request as it arrived: its request line, headers (lowercase names) and body. */
    record Request(String line, Map<String, String> headers, String body) {
        String path() { return line.split(" ")[1]; }
    }

    /** An answer: status, JSON body, and the pause between two bytes of the body (0: at once). */
    record Reply(int status, String body, long dripMillis, String location) {
        static Reply now(int status, String body) { return new Reply(status, body, 0, null); }
        static Reply dripped(int status, String body) { return new Reply(status, body, 1000, null); }
        /** A redirect (3xx) to location. */
        static Reply redirect(int status, String location) { return new Reply(status, "{}", 0, location); }
    }

    private final ServerSocket socket;
    private final Function<Request, Reply> script;
    final List<Request> received = new CopyOnWriteArrayList<>();
    private final List<Socket> open = new CopyOnWriteArrayList<>();

    ScriptedServer(Function<Request, Reply> script) throws IOException {
        this.script = script;
        socket = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread acceptor = new Thread(this::accept, "scripted-server");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    String url() { return "http://127.0.0.1:" + socket.getLocalPort(); }

    private void accept() {
        while (!socket.isClosed()) {
            try {
                Socket connection = socket.accept();
                open.add(connection);
                Thread worker = new Thread(() -> serve(connection), "scripted-connection");
                worker.setDaemon(true);
                worker.start();
            } catch (IOException e) {
                return; // closed
            }
        }
    }

    private void serve(Socket connection) {
        try (connection; InputStream in = connection.getInputStream(); OutputStream out = connection.getOutputStream()) {
            Request request = read(in);
            received.add(request);
            Reply reply = script.apply(request);
            byte[] body = reply.body().getBytes(StandardCharsets.UTF_8);
            String head = "HTTP/1.1 " + reply.status() + " X\r\nContent-Type: application/json\r\nContent-Length: "
                    + body.length + "\r\nConnection: close\r\n"
                    + (reply.location() == null ? "" : "Location: " + reply.location() + "\r\n") + "\r\n";
            out.write(head.getBytes(StandardCharsets.US_ASCII));
            out.flush();
            if (reply.dripMillis() == 0) {
                out.write(body);
                out.flush();
                return;
            }
            for (byte b : body) {
                out.write(b);
                out.flush();
                Thread.sleep(reply.dripMillis());
            }
        } catch (IOException | InterruptedException e) {
            // the client hung up: what a client that gives up does
        } finally {
            open.remove(connection);
        }
    }

    private static Request read(InputStream in) throws IOException {
        String line = readLine(in);
        Map<String, String> headers = new LinkedHashMap<>();
        for (String header = readLine(in); !header.isEmpty(); header = readLine(in)) {
            int colon = header.indexOf(':');
            headers.put(header.substring(0, colon).trim().toLowerCase(Locale.ROOT), header.substring(colon + 1).trim());
        }
        int length = Integer.parseInt(headers.getOrDefault("content-length", "0"));
        return new Request(line, headers, new String(in.readNBytes(length), StandardCharsets.UTF_8));
    }

    private static String readLine(InputStream in) throws IOException {
        ByteArrayOutputStream line = new ByteArrayOutputStream();
        for (int c = in.read(); c != -1 && c != '\n'; c = in.read()) {
            if (c != '\r') {
                line.write(c);
            }
        }
        return line.toString(StandardCharsets.US_ASCII);
    }

    List<Request> requestsTo(String path) {
        List<Request> matching = new ArrayList<>();
        received.stream().filter(r -> r.path().equals(path)).forEach(matching::add);
        return matching;
    }

    @Override
    public void close() throws IOException {
        socket.close();
        for (Socket connection : open) {
            connection.close();
        }
    }
}
