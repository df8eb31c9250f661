package org.pategail.core.tools;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.pategail.core.Bundle;
import org.pategail.core.FedAvgRound;
import org.pategail.core.PolicyTrainer;

/**
 * The policy's {@link PolicyTrainer} on the JVM, where ONNX Runtime's training API does not exist: the same calls
 * handed to ONNX Runtime's training API in a child process ({@code python -m pategail.jvm_policy_trainer}, the
 * Python SDK's policy training session), over its standard input and output. Everything around the session —
 * the labelled days, the minibatches, the checkpoint files the parameters travel in, the delta and its clipping
 * — is the Java core's own, as on a phone. JVM only (it starts a process).
 *
 * <p>Requests: op u8, then for OPEN two strings (bundle directory, checkpoint file), for STEP the learning rate
 * f32, the batch size u32 and the batch's cells (i64), features (f32), mask (u8) and targets (f32), for SAVE a
 * path; a string is a u32 length and UTF-8 bytes; numbers are big-endian. Reply: status u8 (0 = done), a u32
 * length and the payload (STEP: the loss f32; a failure: its message).
 */
public final class ProcessPolicyTrainer implements PolicyTrainer {
    static final int OP_OPEN = 1, OP_STEP = 2, OP_SAVE = 3, OP_CLOSE = 4;
    /** The longest reply the child may send (an error message; a step's loss is 4 bytes). */
    static final int MAX_REPLY = 1 << 20;
    private final List<String> command;
    private Process process;
    private DataOutputStream out;
    private DataInputStream in;

    /** @param command the child process to start at the first {@link #open} (it ends when this JVM does) */
    public ProcessPolicyTrainer(List<String> command) {
        this.command = new ArrayList<>(command);
    }

    @Override
    public void open(Bundle bundle, File checkpoint) throws IOException {
        if (process == null || !process.isAlive()) {
            process = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
            out = new DataOutputStream(new BufferedOutputStream(process.getOutputStream()));
            in = new DataInputStream(new BufferedInputStream(process.getInputStream()));
        }
        out.writeByte(OP_OPEN);
        string(bundle.root.getAbsolutePath());
        string(checkpoint.getAbsolutePath());
        reply();
    }

    @Override
    public float trainStep(FedAvgRound.Batch batch, float learningRate) throws IOException {
        require();
        out.writeByte(OP_STEP);
        out.writeFloat(learningRate);
        out.writeInt(batch.size);
        for (long c : batch.cells) {
            out.writeLong(c);
        }
        for (float f : batch.features) {
            out.writeFloat(f);
        }
        for (boolean m : batch.mask) {
            out.writeByte(m ? 1 : 0);
        }
        for (float t : batch.targets) {
            out.writeFloat(t);
        }
        byte[] loss = reply();
        if (loss.length != 4) {
            throw new IOException("policy trainer process: a step's reply is not one float");
        }
        return new DataInputStream(new java.io.ByteArrayInputStream(loss)).readFloat();
    }

    @Override
    public void saveCheckpoint(File path) throws IOException {
        require();
        out.writeByte(OP_SAVE);
        string(path.getAbsolutePath());
        reply();
    }

    @Override
    public void close() {
        if (process == null || !process.isAlive()) {
            return;
        }
        try {
            out.writeByte(OP_CLOSE);
            reply();
        } catch (IOException err) {              // the process is gone or out of step: the next open starts another
            stop();
        }
    }

    private void stop() {
        if (process == null) {
            return;
        }
        process.destroyForcibly();
        try {
            process.waitFor();
        } catch (InterruptedException err) {
            Thread.currentThread().interrupt();
        }
        process = null;
    }

    private void require() throws IOException {
        if (process == null || !process.isAlive()) {
            throw new IOException("no policy training session: open() one first");
        }
    }

    private void string(String s) throws IOException {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        out.writeInt(b.length);
        out.write(b);
    }

    private byte[] reply() throws IOException {
        out.flush();
        int status = in.readUnsignedByte();
        int length = in.readInt();
        if (status > 1 || length < 0 || length > MAX_REPLY) {      // not this protocol: never read on from here
            stop();
            throw new IOException("policy trainer process: a reply out of step with the protocol");
        }
        byte[] body = new byte[length];
        in.readFully(body);
        if (status != 0) {
            throw new IOException("policy trainer process: " + new String(body, StandardCharsets.UTF_8));
        }
        return body;
    }
}
