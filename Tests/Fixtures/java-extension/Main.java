// java-extension: a Java extension (through Tests/Fixtures/runtime-bridge). Line commands,
// one answer line each:
//   ping          "pong PID java VERSION"
//   allocate MIB  allocates and fills MIB MiB in 1 MiB arrays: "allocated MIB MiB", or
//                 "OutOfMemoryError after N MiB" when the heap is exhausted
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

public class Main {
    static final List<long[]> held = new ArrayList<>();

    static String answer(String line) {
        String[] words = line.trim().split("\\s+");
        switch (words[0]) {
            case "ping":
                return "pong " + ProcessHandle.current().pid() + " java " + Runtime.version().feature();
            case "allocate": {
                int mib = Integer.parseInt(words[1]);
                int done = 0;
                try {
                    for (; done < mib; done++) {
                        long[] block = new long[1 << 17];
                        Arrays.fill(block, done);
                        held.add(block);
                    }
                } catch (OutOfMemoryError e) {
                    held.clear();
                    return "OutOfMemoryError after " + done + " MiB";
                }
                return "allocated " + done + " MiB";
            }
            default:
                return "unknown command: " + words[0];
        }
    }

    public static void main(String[] arguments) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        System.out.println("ready");
        System.out.flush();
        for (String line; (line = in.readLine()) != null; ) {
            System.out.println(answer(line));
            System.out.flush();
        }
    }
}
