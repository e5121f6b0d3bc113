// Single-thread Lucene BM25 timing through Anserini's SimpleSearcher (Anserini's default English
// analyzer, bag-of-words query), mirroring `stillweb-bench bm25`: every query once to warm up, then
// each timed on this thread; the top k written as a TREC run; a JSON summary on stdout.
//
// Anserini 1.7.1 is compiled for Java 21 and the machine's javac is 17, so the harness reaches
// Anserini through reflection (one lookup up front; a reflective call costs well under a
// microsecond against milliseconds of search).
//
// Usage: java -cp anserini-1.7.1-fatjar.jar:DIR LuceneBench INDEX QUERIES.tsv K RUN
import java.io.PrintWriter;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

public class LuceneBench {
  public static void main(String[] args) throws Exception {
    String index = args[0];
    List<String[]> queries = new ArrayList<>();
    for (String line : Files.readAllLines(Path.of(args[1]))) {
      String[] cols = line.split("\t");
      if (cols.length >= 2) queries.add(new String[] {cols[0], cols[1]});
    }
    int k = Integer.parseInt(args[2]);
    Class<?> searcherClass = Class.forName("io.anserini.search.SimpleSearcher");
    Object searcher = searcherClass.getConstructor(String.class).newInstance(index);
    Method search = searcherClass.getMethod("search", String.class, int.class);
    Field docid = Class.forName("io.anserini.search.ScoredDoc").getField("docid");
    Field score = Class.forName("io.anserini.search.ScoredDoc").getField("score");
    try (AutoCloseable closing = (AutoCloseable) searcher) {
      searcherClass.getMethod("set_bm25", float.class, float.class).invoke(searcher, 1.2f, 0.75f);
      for (String[] q : queries) search.invoke(searcher, q[1], k);
      double[] micros = new double[queries.size()];
      List<Object[]> results = new ArrayList<>();
      long start = System.nanoTime();
      for (int i = 0; i < queries.size(); i++) {
        long t = System.nanoTime();
        results.add((Object[]) search.invoke(searcher, queries.get(i)[1], k));
        micros[i] = (System.nanoTime() - t) / 1000.0;
      }
      double seconds = (System.nanoTime() - start) / 1e9;
      try (PrintWriter run = new PrintWriter(Files.newBufferedWriter(Path.of(args[3])))) {
        for (int i = 0; i < queries.size(); i++) {
          Object[] hits = results.get(i);
          for (int r = 0; r < hits.length; r++) {
            run.printf("%s Q0 %s %d %f lucene%n", queries.get(i)[0], docid.get(hits[r]), r + 1,
                score.getFloat(hits[r]));
          }
        }
      }
      double[] sorted = micros.clone();
      Arrays.sort(sorted);
      double mean = Arrays.stream(micros).sum() / micros.length;
      System.out.printf(
          "{\"engine\": \"lucene (anserini 1.7.1)\", \"form\": \"bag\", \"queries\": %d, \"k\": %d, \"seconds\": %.4f, "
              + "\"qps\": %.2f, \"p50_ms\": %.4f, \"p99_ms\": %.4f, \"mean_ms\": %.4f}%n",
          queries.size(), k, seconds, queries.size() / seconds,
          sorted[(int) Math.round((sorted.length - 1) * 0.5)] / 1000.0,
          sorted[(int) Math.round((sorted.length - 1) * 0.99)] / 1000.0, mean / 1000.0);
    }
  }
}
